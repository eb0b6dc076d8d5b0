package memcached

import (
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
	"github.com/fleetstore/fleetstore/internal/testserver"
)

// tlsQuery is the query of a memcacheds:// URL with CA file ca and, when
// cert is not "", the client certificate cert and its key.
func tlsQuery(ca, cert, key string) string {
	q := url.Values{}
	if ca != "" {
		q.Set("tls_ca_file", ca)
	}
	if cert != "" {
		q.Set("tls_cert_file", cert)
		q.Set("tls_key_file", key)
	}
	return q.Encode()
}

// TestConformanceTLS runs the whole conformance suite over TLS, against
// two memcached servers that require a client certificate
// (ssl_verify_mode=2).
func TestConformanceTLS(t *testing.T) {
	certs := testserver.NewCerts(t)
	servers := []*testserver.Memcached{testserver.StartMemcachedTLS(t, certs, true), testserver.StartMemcachedTLS(t, certs, true)}
	plain := []string{servers[0].Addr, servers[1].Addr} // for Records
	q := tlsQuery(certs.CAFile, certs.ClientCertFile, certs.ClientKeyFile)
	conformance.Run(t, conformance.Config{
		URL:         "memcacheds://" + servers[0].TLSAddr + "," + servers[1].TLSAddr + "?" + q,
		AddrURL:     func(a string) string { return "memcacheds://" + a + "?" + q },
		Granularity: granularity,
		Records: func(ctx context.Context, prefix, tenant string) ([]conformance.Record, error) {
			recs, err := mcRecords(ctx, plain, prefix, tenant)
			out := make([]conformance.Record, len(recs))
			for i, r := range recs {
				out[i] = conformance.Record{Key: r.Key, TTL: r.TTL}
			}
			return out, err
		},
		Restart: func() error {
			for _, s := range servers {
				if err := s.Restart(); err != nil {
					return err
				}
			}
			return nil
		},
	})
}

// TestTLS: a CA file and a client certificate given in the URL connect
// to a server that requires one; a wrong CA, no client certificate or one
// of another CA fail closed (ErrUnavailable, nothing written) within the
// budget; skip_verify=true needs no CA.
func TestTLS(t *testing.T) {
	certs := testserver.NewCerts(t)
	srv := testserver.StartMemcachedTLS(t, certs, true)
	base := "memcacheds://" + srv.TLSAddr + "?"
	const budget = 2 * time.Second
	tests := []struct {
		name string
		give string
		ok   bool
	}{
		{"CA and client certificate", base + tlsQuery(certs.CAFile, certs.ClientCertFile, certs.ClientKeyFile), true},
		{"skip_verify and client certificate", base + tlsQuery("", certs.ClientCertFile, certs.ClientKeyFile) + "&skip_verify=true", true},
		{"wrong CA", base + tlsQuery(certs.OtherCAFile, certs.ClientCertFile, certs.ClientKeyFile), false},
		{"system roots", base + tlsQuery("", certs.ClientCertFile, certs.ClientKeyFile), false},
		{"no client certificate", base + tlsQuery(certs.CAFile, "", ""), false},
		{"client certificate of another CA", base + tlsQuery(certs.CAFile, certs.OtherClientCertFile, certs.OtherClientKeyFile), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prefix := "fstest-" + randName()
			st, err := fleetstore.Open(tt.give+"&key_prefix="+prefix, fleetstore.WithTimeout(budget))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			tenant := "tls-" + randName()
			claim := fleetstore.Claim{Tenant: tenant, SourceID: "s", Key: "k", HookID: "h", TTL: time.Minute, PendingTTL: time.Minute}
			start := time.Now()
			res, err := st.Hit(context.Background(), []fleetstore.Charge{{Kind: fleetstore.Hooks, Tenant: tenant, Increment: time.Second, Capacity: time.Minute}}, &claim)
			d := time.Since(start)
			if tt.ok {
				if err != nil || res.Outcome != fleetstore.OK {
					t.Fatalf("hit: %v %v, want OK", res, err)
				}
				return
			}
			if !errors.Is(err, fleetstore.ErrUnavailable) {
				t.Fatalf("hit: %v %v, want ErrUnavailable (fail closed)", res, err)
			}
			t.Logf("fails closed in %v: %v", d, err)
			if d > budget {
				t.Errorf("hit took %v, budget %v", d, budget)
			}
			recs, err := mcRecords(context.Background(), []string{srv.Addr}, prefix, tenant)
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) != 0 {
				t.Errorf("a refused TLS connection wrote %v", recs)
			}
		})
	}
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
	for _, tt := range []struct{ give, field string }{
		{"memcacheds://h1?tls_ca_file=" + missing, "tls_ca_file"},
		{"memcacheds://h1?tls_ca_file=" + certs.ClientKeyFile, "tls_ca_file"},
		{"memcacheds://h1?tls_cert_file=" + certs.ClientCertFile, "tls_key_file"},
		{"memcacheds://h1?tls_cert_file=" + certs.ClientCertFile + "&tls_key_file=" + certs.OtherClientKeyFile, "tls_key_file"},
		{"memcacheds://h1?skip_verify=maybe", "skip_verify"},
		{"memcached://h1?tls_ca_file=" + certs.CAFile, "tls_ca_file"},
		{"memcached://h1?skip_verify=true", "skip_verify"},
		{"memcacheds://h1?tls=true", "tls"},
	} {
		_, err := open(tt.give)
		var ie *driver.InvalidError
		if !errors.As(err, &ie) || ie.Field != "url: "+tt.field {
			t.Errorf("%s: got %v, want ErrInvalid naming url: %s", tt.give, err, tt.field)
		}
	}
	if _, err := fleetstore.Open("memcacheds://h1?nope=1"); err == nil || !strings.Contains(err.Error(), "tls_ca_file") {
		t.Errorf("unknown parameter: %v, want the accepted ones listed", err)
	}
}
