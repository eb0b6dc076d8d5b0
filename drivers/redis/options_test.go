package redis

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/driver"
)

func config(t *testing.T, raw string) driver.Config {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return driver.Config{URL: u, KeyPrefix: "fleetstore", Timeout: 100 * time.Millisecond, Logger: zap.NewNop()}
}

func TestParseURL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		give    string
		cluster bool
		addrs   []string
		db      int
		dial    time.Duration
		read    time.Duration
		tls     bool
	}{
		{give: "redis://127.0.0.1:6379/0", addrs: []string{"127.0.0.1:6379"}, dial: 100 * time.Millisecond, read: 100 * time.Millisecond},
		{give: "redis://cache/3", addrs: []string{"cache:6379"}, db: 3, dial: 100 * time.Millisecond, read: 100 * time.Millisecond},
		{give: "redis://h:1?db=2&read_timeout=50ms&pool_size=4&client_name=edge", addrs: []string{"h:1"}, db: 2, dial: 100 * time.Millisecond, read: 50 * time.Millisecond},
		{give: "rediss://:pw@h:6380?skip_verify=true&dial_timeout=20ms", addrs: []string{"h:6380"}, tls: true, dial: 20 * time.Millisecond, read: 100 * time.Millisecond},
		{give: "redis+cluster://a:1?addr=b:2&addr=c:3&max_redirects=2", cluster: true, addrs: []string{"a:1", "b:2", "c:3"}, dial: 100 * time.Millisecond, read: 100 * time.Millisecond},
		{give: "redis://a:1?addr=b:2", cluster: true, addrs: []string{"a:1", "b:2"}, dial: 100 * time.Millisecond, read: 100 * time.Millisecond},
		{give: "redis+cluster://a:1/0", cluster: true, addrs: []string{"a:1"}, dial: 100 * time.Millisecond, read: 100 * time.Millisecond},
	}
	for _, tt := range tests {
		o, err := parseURL(config(t, tt.give))
		if err != nil {
			t.Errorf("%s: %v", tt.give, err)
			continue
		}
		if (o.cluster != nil) != tt.cluster {
			t.Errorf("%s: cluster %v, want %v", tt.give, o.cluster != nil, tt.cluster)
			continue
		}
		if o.single != nil {
			so := o.single
			if so.Addr != tt.addrs[0] || so.DB != tt.db || so.DialTimeout != tt.dial || so.ReadTimeout != tt.read ||
				(so.TLSConfig != nil) != tt.tls || !so.ContextTimeoutEnabled || so.MaxRetries != -1 || so.DialerRetries != 1 ||
				so.PoolTimeout != 100*time.Millisecond || so.MinIdleConns != 0 {
				t.Errorf("%s: got %+v", tt.give, so)
			}
			continue
		}
		co := o.cluster
		if strings.Join(co.Addrs, ",") != strings.Join(tt.addrs, ",") || co.DialTimeout != tt.dial || co.ReadTimeout != tt.read ||
			!co.ContextTimeoutEnabled || co.MaxRetries != -1 || co.DialerRetries != 1 || co.ReadOnly {
			t.Errorf("%s: got %+v", tt.give, co)
		}
	}
}

func TestParseURLErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		give  string
		field string // named in the error
	}{
		{"redis://h:1?bogus=1", "bogus"},
		{"redis://h:1?max_retries=3", "max_retries"},
		{"redis://h:1?min_idle_conns=3", "min_idle_conns"},
		{"redis://h:1?dialer_retries=3", "dialer_retries"},
		{"redis+cluster://h:1?read_only=true", "read_only"},
		{"redis://h:1?read_timeout=1s", "read_timeout"},
		{"redis://h:1?dial_timeout=-1", "dial_timeout"},
		{"redis://h:1?pool_timeout=x", "pool_timeout"},
		{"redis://h:1?write_timeout=", "write_timeout"},
		{"redis://h:1?skip_verify=true", "skip_verify"},
		{"redis+cluster://h:1?db=2", "db"},
		{"redis+cluster://h:1/2", "path"},
		{"redis://h:1/a/b", "path"},
		{"redis://h:1?pool_size=many", "pool_size"},
		{"redis://h:1?addr=nocolon", "addr"},
		{"redis:opaque", "url"},
		{"redis://h:1?pipeline=on", "pipeline"},
		{"redis://h:99999/0", "host"},
		{"redis://h:0", "host"},
		{"redis://h:/0", "host"},
		// An unknown parameter's error lists every form's, those that
		// make the URL a cluster's or a Sentinel's included.
		{"redis://h:1?bogus=1", "addr, max_redirects, master_name"},
		{"redis://h:1?addr=h:2&db=0", "db: not a parameter of a cluster URL"},
	}
	for _, tt := range tests {
		_, err := parseURL(config(t, tt.give))
		if !errors.Is(err, driver.ErrInvalid) {
			t.Errorf("%s: got %v, want ErrInvalid", tt.give, err)
			continue
		}
		if !strings.Contains(err.Error(), tt.field) {
			t.Errorf("%s: error %q does not name %s", tt.give, err, tt.field)
		}
	}
}

// TestAddrsChecked: a host list, or an addr= with userinfo or a list, is
// ErrInvalid at Open naming the parameter, and the error holds no
// password (go-redis's own parse error would quote the addr).
func TestAddrsChecked(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{
		"redis://h1:6379,h2:6379/0",
		"redis+cluster://u:s3cret@h1:6379?addr=u:s3cret@h2:6379",
		"redis://h1:6379?addr=h2:6379,h3:6379",
		"redis://h1:6379?addr=",
	} {
		_, err := fleetstore.Open(raw)
		if !errors.Is(err, fleetstore.ErrInvalid) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Open(%q): %v, want ErrInvalid without the password", strings.ReplaceAll(raw, "s3cret", "***"), err)
		}
	}
}
