package memcached

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/conformance"
	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/internal/testing/testserver"
	"github.com/fleetstore/fleetstore/internal/testing/tlstest"
)

var tlsQuery = testserver.TLSQuery

// TestConformanceTLS runs the whole conformance suite over TLS, against
// two memcached servers that require a client certificate
// (ssl_verify_mode=2).
func TestConformanceTLS(t *testing.T) {
	t.Parallel()
	certs := testserver.NewCerts(t)
	servers := []*testserver.Memcached{testserver.StartMemcachedTLS(t, certs, true), testserver.StartMemcachedTLS(t, certs, true)}
	q := tlsQuery(certs.CAFile, certs.ClientCertFile, certs.ClientKeyFile)
	cfg := suiteConfig("memcacheds://"+servers[0].TLSAddr+","+servers[1].TLSAddr+"?"+q, servers)
	cfg.Serial = true // TLS handshakes by the dozen under -race would delay the timed clauses
	conformance.Run(t, cfg)
}

// TestTLS: a CA file and a client certificate given in the URL connect
// to a server that requires one; a wrong CA, no client certificate or one
// of another CA fail closed (ErrUnavailable, nothing written) within the
// budget; skip_verify=true needs no CA.
func TestTLS(t *testing.T) {
	certs := testserver.NewCerts(t)
	srv := testserver.StartMemcachedTLS(t, certs, true)
	tlstest.Clients(t, certs, 2*time.Second,
		func(query string) string { return "memcacheds://" + srv.TLSAddr + "?" + query },
		func(prefix string) (int, error) { // over the plain listener
			nc, err := net.DialTimeout("tcp", srv.Addr, time.Second)
			if err != nil {
				return 0, err
			}
			defer nc.Close()
			nc.SetDeadline(time.Now().Add(5 * time.Second))
			keys, err := mcDump(nc, bufio.NewReader(nc), func(key string) bool { return strings.HasPrefix(key, prefix+":") })
			return len(keys), err
		})
}

// TestTLSServerName: memcached hosts are resolved before the dial, yet
// the server is verified under the host as in the URL: a certificate for
// the name localhost alone is good for memcacheds://localhost:PORT, and
// not for the same server as memcacheds://127.0.0.1:PORT.
func TestTLSServerName(t *testing.T) {
	certs := testserver.NewCerts(t)
	byName := *certs
	byName.ServerCertFile, byName.ServerKeyFile = certs.NameCertFile, certs.NameKeyFile
	srv := testserver.StartMemcachedTLS(t, &byName, false)
	_, port, _ := net.SplitHostPort(srv.TLSAddr)
	q := "?" + tlsQuery(certs.CAFile, "", "")
	for _, tt := range []struct {
		host string
		ok   bool
	}{{"localhost", true}, {"127.0.0.1", false}} {
		st, err := fleetstore.Open("memcacheds://"+net.JoinHostPort(tt.host, port)+q, fleetstore.WithTimeout(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		err = st.Ping(context.Background())
		st.Close()
		switch {
		case tt.ok && err != nil:
			t.Errorf("%s: ping: %v, want the certificate of localhost verified under the URL's name", tt.host, err)
		case !tt.ok && !errors.Is(err, fleetstore.ErrUnavailable):
			t.Errorf("%s: ping: %v, want ErrUnavailable (the certificate has no IP address)", tt.host, err)
		}
	}
}

// TestTLSOpen: memcacheds:// takes skip_verify and the TLS files, read
// by Open (a bad path or file is ErrInvalid naming the parameter);
// memcached:// takes none of them.
func TestTLSOpen(t *testing.T) {
	certs := testserver.NewCerts(t)
	missing := filepath.Join(t.TempDir(), "missing.pem")
	open := func(raw string) (driver.Conn, error) {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		return Driver{}.Open(driver.Config{URL: u, KeyPrefix: "p", Timeout: time.Second, Logger: zap.NewNop()})
	}
	c, err := open("memcacheds://h1,h2?skip_verify=true&" + tlsQuery(certs.CAFile, certs.ClientCertFile, certs.ClientKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	tc := c.(*conn).sv.tls
	if tc == nil || !tc.InsecureSkipVerify || tc.RootCAs == nil || len(tc.Certificates) != 1 || tc.MinVersion == 0 {
		t.Errorf("TLS config %+v: want skip_verify, the CA and the client certificate", tc)
	}
	c.Close()
	if c, err := open("memcached://h1"); err != nil || c.(*conn).sv.tls != nil {
		t.Errorf("memcached://: %v, TLS %v: want plain TCP", err, c.(*conn).sv.tls)
	}
	tlstest.OpenErrors(t, map[string]string{
		"memcacheds://h1?tls_ca_file=" + missing:                                                              "tls_ca_file",
		"memcacheds://h1?tls_ca_file=" + certs.ClientKeyFile:                                                  "tls_ca_file",
		"memcacheds://h1?tls_cert_file=" + certs.ClientCertFile:                                               "tls_key_file",
		"memcacheds://h1?tls_cert_file=" + certs.ClientCertFile + "&tls_key_file=" + certs.OtherClientKeyFile: "tls_key_file",
		"memcacheds://h1?skip_verify=maybe":                                                                   "skip_verify",
		"memcached://h1?tls_ca_file=" + certs.CAFile:                                                          "tls_ca_file",
		"memcached://h1?skip_verify=true":                                                                     "skip_verify",
		"memcacheds://h1?tls=true":                                                                            "tls",
	})
	if _, err := fleetstore.Open("memcacheds://h1?nope=1"); err == nil || !strings.Contains(err.Error(), "tls_ca_file") {
		t.Errorf("unknown parameter: %v, want the accepted ones listed", err)
	}
}
