package valkey

import (
	"context"
	"errors"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/conformance"
	"github.com/fleetstore/fleetstore/internal/testserver"
)

// tlsQuery is the query of a valkeys:// URL with CA file ca and, when
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

// TestConformanceTLS runs the whole conformance suite over TLS, against a
// server that requires a client certificate (tls-auth-clients yes).
func TestConformanceTLS(t *testing.T) {
	certs := testserver.NewCerts(t)
	r := startServer(t, testserver.TLS(certs, true))
	q := tlsQuery(certs.CAFile, certs.ClientCertFile, certs.ClientKeyFile)
	conformance.Run(t, conformance.Config{
		URL:          "valkeys://" + r.TLSAddr + "?" + q,
		AddrURL:      func(addr string) string { return "valkeys://" + addr + "?" + q },
		Records:      recordsOn([]*testserver.Redis{r}), // over the plain port
		Restart:      r.Restart,
		FlushScripts: func() error { _, err := r.Do("SCRIPT", "FLUSH"); return err },
	})
}

// TestTLS: a CA file and a client certificate given in the URL connect
// to a server that requires one; a wrong CA, no client certificate or one
// of another CA fail closed (ErrUnavailable, nothing written) within the
// budget; skip_verify=true needs no CA.
func TestTLS(t *testing.T) {
	certs := testserver.NewCerts(t)
	r := startServer(t, testserver.TLS(certs, true))
	base := "valkeys://" + r.TLSAddr + "?"
	const timeout = 2 * time.Second
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
			prefix := "vt" + randName()
			c := testConnPrefixed(t, tt.give, prefix, timeout, nil)
			start := time.Now()
			res, err := c.Hit(context.Background(), hooks("tls-"+randName(), time.Second, time.Minute), nil)
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
			if d > timeout {
				t.Errorf("hit took %v, budget %v", d, timeout)
			}
			if keys, err := r.Do("KEYS", prefix+":*"); err != nil || len(keys.([]any)) != 0 {
				t.Errorf("a refused TLS connection wrote %v (%v)", keys, err)
			}
		})
	}
}

// TestTLSFilesAtOpen: the files are read by Open, so a bad path or file
// is ErrInvalid at Open naming the parameter, in every form of URL; the
// TLS parameters are refused on a plain valkey:// URL.
func TestTLSFilesAtOpen(t *testing.T) {
	certs := testserver.NewCerts(t)
	missing := filepath.Join(t.TempDir(), "missing.pem")
	tests := []struct {
		give, field string
	}{
		{"valkeys://:s3cret@h:1?tls_ca_file=" + missing, "tls_ca_file"},
		{"valkeys://:s3cret@h:1?addr=h:2&tls_ca_file=" + missing, "tls_ca_file"},
		{"valkeys://:s3cret@h:1?master_set=m&tls_ca_file=" + missing, "tls_ca_file"},
		{"valkeys://:s3cret@h:1?tls_cert_file=" + certs.ClientCertFile + "&tls_key_file=" + missing, "tls_key_file"},
		{"valkeys://:s3cret@h:1?tls_key_file=" + certs.ClientKeyFile, "tls_cert_file"},
		{"valkeys://:s3cret@h:1?tls_ca_file=" + certs.ClientKeyFile, "tls_ca_file"},
		{"valkey://:s3cret@h:1?tls_ca_file=" + certs.CAFile, "tls_ca_file"},
		{"valkey://:s3cret@h:1?master_set=m&skip_verify=true", "skip_verify"},
	}
	for _, tt := range tests {
		_, err := fleetstore.Open(tt.give)
		var ie *fleetstore.InvalidError
		if !errors.As(err, &ie) || ie.Field != "url: "+tt.field {
			t.Errorf("%s: got %v, want ErrInvalid naming url: %s", tt.give, err, tt.field)
			continue
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: the error shows the password: %v", tt.give, err)
		}
	}
}

// TestTLSOptions: the files reach valkey-go's TLS config.
func TestTLSOptions(t *testing.T) {
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
