package valkey

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore/conformance"
	"github.com/fleetstore/fleetstore/internal/testing/testserver"
	"github.com/fleetstore/fleetstore/internal/testing/tlstest"
)

var tlsQuery = testserver.TLSQuery

// TestConformanceTLS runs the whole conformance suite over TLS, against a
// server that requires a client certificate (tls-auth-clients yes).
func TestConformanceTLS(t *testing.T) {
	t.Parallel()
	certs := testserver.NewCerts(t)
	r := startServer(t, testserver.TLS(certs, true))
	q := tlsQuery(certs.CAFile, certs.ClientCertFile, certs.ClientKeyFile)
	conformance.Run(t, conformance.Config{
		URL:          "valkeys://" + r.TLSAddr + "?" + q,
		AddrURL:      func(addr string) string { return "valkeys://" + addr + "?" + q },
		Records:      recordsOn([]*testserver.Redis{r}), // over the plain port
		Restart:      r.Restart,
		FlushScripts: r.FlushScripts,
		Serial:       true, // TLS handshakes by the dozen under -race: see TestConformanceClusterTLS
	})
}

// TestTLS: a CA file and a client certificate given in the URL connect
// to a server that requires one; a wrong CA, no client certificate or one
// of another CA fail closed (ErrUnavailable, nothing written) within the
// budget; skip_verify=true needs no CA.
func TestTLS(t *testing.T) {
	certs := testserver.NewCerts(t)
	r := startServer(t, testserver.TLS(certs, true))
	tlstest.Clients(t, certs, 2*time.Second,
		func(query string) string { return "valkeys://" + r.TLSAddr + "?" + query },
		func(prefix string) (int, error) {
			keys, err := r.Do("KEYS", prefix+":*")
			list, _ := keys.([]any)
			return len(list), err
		})
}

// TestTLSFilesAtOpen: the files are read by Open, so a bad path or file
// is ErrInvalid at Open naming the parameter, in every form of URL; the
// TLS parameters are refused on a plain valkey:// URL.
func TestTLSFilesAtOpen(t *testing.T) {
	t.Parallel()
	certs := testserver.NewCerts(t)
	missing := filepath.Join(t.TempDir(), "missing.pem")
	pw := tlstest.Password
	tlstest.OpenErrors(t, map[string]string{
		"valkeys://:" + pw + "@h:1?tls_ca_file=" + missing:                                             "tls_ca_file",
		"valkeys://:" + pw + "@h:1?addr=h:2&tls_ca_file=" + missing:                                    "tls_ca_file",
		"valkeys://:" + pw + "@h:1?master_set=m&tls_ca_file=" + missing:                                "tls_ca_file",
		"valkeys://:" + pw + "@h:1?tls_cert_file=" + certs.ClientCertFile + "&tls_key_file=" + missing: "tls_key_file",
		"valkeys://:" + pw + "@h:1?tls_key_file=" + certs.ClientKeyFile:                                "tls_cert_file",
		"valkeys://:" + pw + "@h:1?tls_ca_file=" + certs.ClientKeyFile:                                 "tls_ca_file",
		"valkey://:" + pw + "@h:1?tls_ca_file=" + certs.CAFile:                                         "tls_ca_file",
		"valkey://:" + pw + "@h:1?master_set=m&skip_verify=true":                                       "skip_verify",
	})
}

// TestTLSOptions: the files reach valkey-go's TLS config.
func TestTLSOptions(t *testing.T) {
	t.Parallel()
	certs := testserver.NewCerts(t)
	for _, raw := range []string{
		"valkeys://h:1?" + tlsQuery(certs.CAFile, certs.ClientCertFile, certs.ClientKeyFile),
		"valkeys://h:1?addr=h:2&" + tlsQuery(certs.CAFile, certs.ClientCertFile, certs.ClientKeyFile),
	} {
		o, err := parse(t, raw)
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		if tc := o.client.TLSConfig; tc == nil || tc.RootCAs == nil || len(tc.Certificates) != 1 || tc.ServerName != "h" {
			t.Errorf("%s: TLS %+v: want the CA, the client certificate, server name h", raw, tc)
		}
	}
}

// TestConformanceClusterTLS runs the whole conformance suite over TLS on
// a three-master cluster (tls-cluster yes) that requires a client
// certificate.
func TestConformanceClusterTLS(t *testing.T) {
	t.Parallel()
	certs := testserver.NewCerts(t)
	c := testserver.StartCluster(t, testserver.Binary(serverBinary), testserver.TLS(certs, true), testserver.ConfigLines("tls-cluster yes"))
	q := tlsQuery(certs.CAFile, certs.ClientCertFile, certs.ClientKeyFile)
	conformance.Run(t, conformance.Config{
		URL:          "valkeys://" + c.Nodes[0].TLSAddr + "?addr=" + c.Nodes[1].TLSAddr + "&addr=" + c.Nodes[2].TLSAddr + "&" + q,
		AddrURL:      func(addr string) string { return "valkeys://" + addr + "?" + q },
		Records:      recordsOn(c.Nodes), // over the plain ports
		Restart:      c.Restart,
		FlushScripts: c.FlushScripts,
		// One clause at a time: each Store opens TLS to three nodes, and
		// two dozen clauses doing so at once under -race delayed calls
		// past the intervals G8, C9 and V4 measure.
		Serial: true,
	})
}
