package tlsfiles_test

import (
	"crypto/tls"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/internal/testing/testserver"
	"github.com/fleetstore/fleetstore/internal/tlsfiles"
)

func TestApply(t *testing.T) {
	t.Parallel()
	certs := testserver.NewCerts(t)
	q := url.Values{
		tlsfiles.CAFile:   {certs.CAFile},
		tlsfiles.CertFile: {certs.ClientCertFile},
		tlsfiles.KeyFile:  {certs.ClientKeyFile},
	}
	var c tls.Config
	if err := tlsfiles.Apply(&c, q); err != nil {
		t.Fatal(err)
	}
	if c.RootCAs == nil || len(c.Certificates) != 1 {
		t.Fatalf("RootCAs %v, %d certificates: want the CA and one client certificate", c.RootCAs, len(c.Certificates))
	}
	var none tls.Config
	if err := tlsfiles.Apply(&none, url.Values{}); err != nil || none.RootCAs != nil || none.Certificates != nil {
		t.Fatalf("no parameters: %v, RootCAs %v, %d certificates: want the config untouched", err, none.RootCAs, len(none.Certificates))
	}
	if got := tlsfiles.Given(url.Values{"db": {"1"}, tlsfiles.KeyFile: {"k"}}); got != tlsfiles.KeyFile {
		t.Errorf("Given: %q", got)
	}
}

func TestApplyErrors(t *testing.T) {
	t.Parallel()
	certs := testserver.NewCerts(t)
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	key, err := os.ReadFile(certs.ClientKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.pem")
	tests := []struct {
		name  string
		give  url.Values
		field string
		say   string // in the reason
	}{
		{"missing CA", url.Values{tlsfiles.CAFile: {missing}}, tlsfiles.CAFile, "no such file"},
		{"empty CA", url.Values{tlsfiles.CAFile: {""}}, tlsfiles.CAFile, "empty"},
		{"CA not PEM", url.Values{tlsfiles.CAFile: {notPEM}}, tlsfiles.CAFile, "no PEM certificate"},
		{"CA a directory", url.Values{tlsfiles.CAFile: {dir}}, tlsfiles.CAFile, "cannot read"},
		{"CA twice", url.Values{tlsfiles.CAFile: {certs.CAFile, certs.CAFile}}, tlsfiles.CAFile, "2 times"},
		{"cert without key", url.Values{tlsfiles.CertFile: {certs.ClientCertFile}}, tlsfiles.KeyFile, "missing"},
		{"key without cert", url.Values{tlsfiles.KeyFile: {certs.ClientKeyFile}}, tlsfiles.CertFile, "missing"},
		{"missing cert", url.Values{tlsfiles.CertFile: {missing}, tlsfiles.KeyFile: {certs.ClientKeyFile}}, tlsfiles.CertFile, "no such file"},
		{"missing key", url.Values{tlsfiles.CertFile: {certs.ClientCertFile}, tlsfiles.KeyFile: {missing}}, tlsfiles.KeyFile, "no such file"},
		{"cert not PEM", url.Values{tlsfiles.CertFile: {notPEM}, tlsfiles.KeyFile: {certs.ClientKeyFile}}, tlsfiles.CertFile, "no PEM certificate"},
		{"key is a certificate", url.Values{tlsfiles.CertFile: {certs.ClientCertFile}, tlsfiles.KeyFile: {certs.ClientCertFile}}, tlsfiles.KeyFile, "key"},
		{"another certificate's key", url.Values{tlsfiles.CertFile: {certs.ClientCertFile}, tlsfiles.KeyFile: {certs.OtherClientKeyFile}}, tlsfiles.KeyFile, "does not match"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c tls.Config
			err := tlsfiles.Apply(&c, tt.give)
			var ie *driver.InvalidError
			if !errors.As(err, &ie) || !errors.Is(err, driver.ErrInvalid) || ie.Field != "url: "+tt.field {
				t.Fatalf("got %v, want ErrInvalid naming url: %s", err, tt.field)
			}
			t.Log(err)
			if !strings.Contains(ie.Reason, tt.say) {
				t.Errorf("reason %q does not say %q", ie.Reason, tt.say)
			}
			if strings.Contains(err.Error(), "PRIVATE KEY") || strings.Contains(err.Error(), string(key[40:60])) {
				t.Errorf("error quotes a file's content: %v", err)
			}
			if c.RootCAs != nil && tt.field == tlsfiles.CAFile || c.Certificates != nil {
				t.Errorf("config changed by a failed Apply: RootCAs %v, %d certificates", c.RootCAs, len(c.Certificates))
			}
		})
	}
}
