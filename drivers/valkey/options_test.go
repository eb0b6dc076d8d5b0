package valkey

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/nettest"
)

func parse(t *testing.T, raw string) (*options, error) {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return parseURL(driver.Config{URL: u, KeyPrefix: "p", Timeout: 100 * time.Millisecond, Logger: zap.NewNop()})
}

// TestOptions pins the client settings the contract needs, whatever the
// URL asks.
func TestOptions(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{
		"valkey://h:1",
		"valkey://:secret@h:1/3?client_cache=0&max_retries=0&protocol=2&client_name=n",
		"valkeys://u:secret@h:1?skip_verify=true",
		"valkey://h:1?addr=h:2&addr=h:3&dial_timeout=50ms&write_timeout=50ms",
		"valkey://h:1/",
	} {
		o, err := parse(t, raw)
		if err != nil {
			t.Errorf("%s: %v", raw, err)
			continue
		}
		co := o.client
		if !co.DisableCache || !co.DisableRetry || co.ForceSingleClient || co.ReplicaOnly || !co.AlwaysPipelining || co.PipelineMultiplex != -1 {
			t.Errorf("%s: contract settings not forced: %+v", raw, co)
		}
		if co.Dialer.Timeout <= 0 || co.Dialer.Timeout > 100*time.Millisecond || co.ConnWriteTimeout <= 0 || co.ConnWriteTimeout > 100*time.Millisecond {
			t.Errorf("%s: dial timeout %v, write timeout %v: want within the 100ms budget", raw, co.Dialer.Timeout, co.ConnWriteTimeout)
		}
		if strings.Contains(o.display, "secret") {
			t.Errorf("%s: display %q shows the password", raw, o.display)
		}
	}
	o, _ := parse(t, "valkey://:pw@h:1/3?protocol=2")
	if o.client.SelectDB != 3 || !o.client.AlwaysRESP2 || o.client.Password != "pw" || len(o.client.InitAddress) != 1 {
		t.Errorf("valkey-go parameters lost: %+v", o.client)
	}
	o, _ = parse(t, "valkey://h:1?addr=h:2&addr=h:3")
	if got := o.client.InitAddress; len(got) != 3 {
		t.Errorf("cluster addresses: %v", got)
	}
	o, _ = parse(t, "valkeys://h:1")
	if o.client.TLSConfig == nil || o.client.TLSConfig.ServerName != "h" {
		t.Errorf("valkeys: no TLS config")
	}
}

func TestOptionsRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ give, field string }{
		{"valkey://:secret@h:1?foo=1", "url: foo"},
		{"valkey://:secret@h:1?client_cache=1", "url: client_cache"},
		{"valkey://:secret@h:1?max_retries=3", "url: max_retries"},
		{"valkey://:secret@h:1?master_set=", "url: master_set"},
		{"valkey://:secret@h:1?skip_verify=true", "url: skip_verify"},
		{"valkey://:secret@h:1?dial_timeout=1s", "url: dial_timeout"},
		{"valkey://:secret@h:1?write_timeout=x", "url: write_timeout"},
		{"valkey://:secret@h:1?protocol=4", "url: protocol"},
		{"valkey://:secret@h:1?db=x", "url: db"},
		{"valkey://:secret@h:1/x", "url"},
		{"valkey://:secret@h:1/1?addr=h:2", "url: path"},
		{"valkey://:secret@h:1?addr=h:2&db=1", "url: db"},
		{"valkey:opaque", "url"},
	} {
		_, err := parse(t, tc.give)
		var ie *driver.InvalidError
		if !errors.As(err, &ie) || ie.Field != tc.field {
			t.Errorf("%s: got %v, want an invalid %q", tc.give, err, tc.field)
			continue
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: error shows the password: %v", tc.give, err)
		}
	}
}

// TestOpenNoIO: Open registers both schemes, accepts a black-holed
// address at once, and Close after no call is quick.
func TestOpenNoIO(t *testing.T) {
	addr := nettest.BlackHole(t)
	for _, scheme := range []string{"valkey", "valkeys"} {
		start := time.Now()
		st, err := fleetstore.Open(scheme + "://" + addr)
		if err != nil {
			t.Fatalf("%s: %v", scheme, err)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d > 20*time.Millisecond {
			t.Errorf("%s: open and close took %v", scheme, d)
		}
	}
}

// TestAddrsChecked: as the redis driver's, for valkey:// URLs.
func TestAddrsChecked(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{
		"valkey://h1:6379,h2:6379/0",
		"valkey://u:s3cret@h1:6379?addr=u:s3cret@h2:6379",
		"valkey://h1:6379?addr=h2:6379,h3:6379",
		"valkey://h1:26379?master_set=m&addr=s3cret:x",
		"valkey://u:s3cret@h1:99999",
		"valkey://u:s3cret@h1:0",
	} {
		_, err := fleetstore.Open(raw)
		if !errors.Is(err, fleetstore.ErrInvalid) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Open(%q): %v, want ErrInvalid without the password", strings.ReplaceAll(raw, "s3cret", "***"), err)
		}
	}
}

// TestUnknownParamListsEveryForm: an unknown parameter's error lists the
// parameters of every URL form, those that make it a cluster's or a
// Sentinel's included; a parameter of another form names this one.
func TestUnknownParamListsEveryForm(t *testing.T) {
	t.Parallel()
	_, err := fleetstore.Open("valkey://h:1?bogus=1")
	if !errors.Is(err, fleetstore.ErrInvalid) || !strings.Contains(err.Error(), "addr, master_set") {
		t.Errorf("unknown parameter: %v, want ErrInvalid listing addr and master_set", err)
	}
	_, err = fleetstore.Open("valkey://h:1?addr=h:2&db=0")
	if !errors.Is(err, fleetstore.ErrInvalid) ||
		!strings.Contains(err.Error(), "db: not a parameter of a cluster URL") {
		t.Errorf("db on a cluster URL: %v, want ErrInvalid naming db and the form", err)
	}
}
