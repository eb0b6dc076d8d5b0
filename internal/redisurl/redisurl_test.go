package redisurl

import (
	"crypto/tls"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore/driver"
)

var spec = Spec{
	TLSScheme: "rediss", ClusterScheme: "redis+cluster", Master: "master_name",
	Single:   []string{"db", "skip_verify", "dial_timeout", "tls_ca_file", "x"},
	Cluster:  []string{"addr", "dial_timeout", "tls_ca_file", "x"},
	Sentinel: []string{"master_name", "addr", "db", "dial_timeout", "tls_ca_file", "x"},
	Timeouts: []string{"dial_timeout"},
}

func check(t *testing.T, raw string) (*Checked, error) {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return spec.Check(driver.Config{URL: u, Timeout: 100 * time.Millisecond})
}

// TestCheck: the form, the timeouts and the TLS files taken out of the
// query, a cluster's path dropped; what is left goes to the parser.
func TestCheck(t *testing.T) {
	for _, tt := range []struct {
		give, want string
		form       Form
		dial       time.Duration
		files      int
	}{
		{give: "redis://h:1/2?x=1", want: "redis://h:1/2?x=1", form: Single, dial: 100 * time.Millisecond},
		{give: "redis://h:1?addr=h:2&dial_timeout=5ms", want: "redis://h:1?addr=h%3A2", form: Cluster,
			dial: 5 * time.Millisecond},
		{give: "redis+cluster://h:1/0", want: "redis+cluster://h:1", form: Cluster, dial: 100 * time.Millisecond},
		{give: "rediss://h:1/1?master_name=m&tls_ca_file=/ca.pem", want: "rediss://h:1/1?master_name=m",
			form: Sentinel, dial: 100 * time.Millisecond, files: 1},
	} {
		c, err := check(t, tt.give)
		if err != nil {
			t.Errorf("%s: %v", tt.give, err)
			continue
		}
		if c.Form != tt.form || c.String() != tt.want || c.Timeouts["dial_timeout"] != tt.dial ||
			len(c.Files) != tt.files {
			t.Errorf("%s: form %v, %s, dial %v, files %v; want %v, %s, %v, %d files",
				tt.give, c.Form, c.String(), c.Timeouts["dial_timeout"], c.Files, tt.form, tt.want, tt.dial, tt.files)
		}
	}
}

// TestCheckRefuses: each check names its field.
func TestCheckRefuses(t *testing.T) {
	for _, tt := range []struct{ give, field string }{
		{"redis://h:1?bogus=1", "url: bogus"},
		{"redis://h:1?addr=h:2&db=1", "url: db"},
		{"redis://h:1?addr=h:2,h:3", "url: addr"},
		{"redis:opaque", "url"},
		{"redis://h:1?skip_verify=true", "url: skip_verify"},
		{"redis://h:1?tls_ca_file=/ca.pem", "url: tls_ca_file"},
		{"redis://h:1?master_name=", "url: master_name"},
		{"redis://h:1?dial_timeout=1s", "url: dial_timeout"},
		{"redis+cluster://h:1/2", "url: path"},
		{"redis://h:1/2?addr=h:2", "url: path"},
	} {
		_, err := check(t, tt.give)
		var ie *driver.InvalidError
		if !errors.As(err, &ie) || ie.Field != tt.field {
			t.Errorf("%s: got %v, want an invalid %q", tt.give, err, tt.field)
		}
	}
}

// TestTLS: the files are read into the parser's config, and on a Sentinel
// URL every server is verified under its own address.
func TestTLS(t *testing.T) {
	c, err := check(t, "rediss://h:1?master_name=m&tls_ca_file=/nonexistent/ca.pem")
	if err != nil {
		t.Fatal(err)
	}
	var ie *driver.InvalidError
	if err := c.TLS(nil); err != nil {
		t.Errorf("TLS(nil): %v, want nil: no TLS", err)
	}
	if err := c.TLS(new(tls.Config)); !errors.As(err, &ie) || ie.Field != "url: tls_ca_file" {
		t.Errorf("TLS with a missing CA file: %v, want an invalid url: tls_ca_file", err)
	}
	c, _ = check(t, "rediss://h:1?master_name=m")
	conf := &tls.Config{ServerName: "h"}
	if err := c.TLS(conf); err != nil || conf.ServerName != "" {
		t.Errorf("Sentinel TLS: %v, ServerName %q, want none", err, conf.ServerName)
	}
	c, _ = check(t, "rediss://h:1")
	conf = &tls.Config{ServerName: "h"}
	if err := c.TLS(conf); err != nil || conf.ServerName != "h" {
		t.Errorf("one-server TLS: %v, ServerName %q, want h", err, conf.ServerName)
	}
}
