package valkey

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/conformance"
	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/internal/testing/testserver"
)

// userOption is the option an application gives FromOption: the settings
// the contract needs, everything else valkey-go's defaults (client-side
// caching on among them).
func userOption(addrs []string, budget time.Duration) valkey.ClientOption {
	return valkey.ClientOption{
		InitAddress:      addrs,
		DisableRetry:     true,
		Dialer:           net.Dialer{Timeout: budget},
		ConnWriteTimeout: budget,
		AlwaysPipelining: true,
	}
}

// userOptions is a driver that does what an application does for each
// Store: build its option for the URL's servers and open the Store with
// FromOption and a URL of common parameters only. The conformance suite
// aims it at its own listeners through the URL.
type userOptions struct{}

func (userOptions) ExpiryGranularity() time.Duration { return 2 * time.Millisecond }

func (userOptions) Open(cfg driver.Config) (driver.Conn, error) {
	u := *cfg.URL
	q := u.Query()
	addrs := append([]string{u.Host}, q["addr"]...)
	q.Del("addr")
	u.Host, u.Path, u.RawQuery = "", "", q.Encode()
	cfg.URL = &u
	return FromOption(userOption(addrs, cfg.Timeout), nil).Open(cfg)
}

// TestConformanceFromOption runs the whole conformance suite on Stores
// opened with FromOption on options built as an application builds them.
func TestConformanceFromOption(t *testing.T) {
	t.Parallel()
	r := startServer(t)
	conformance.Run(t, conformance.Config{
		Driver:       userOptions{},
		URL:          addrURL(r.Addr),
		Records:      recordsOn([]*testserver.Redis{r}),
		Restart:      r.Restart,
		FlushScripts: r.FlushScripts,
	})
}

// TestFromOptionRefuses: each setting that would break the contract is
// refused at Open with ErrInvalid naming it; nothing is dialed.
func TestFromOptionRefuses(t *testing.T) {
	t.Parallel()
	const budget = 100 * time.Millisecond
	addrs := []string{"127.0.0.1:1"}
	for _, tc := range []struct {
		name   string
		change func(*valkey.ClientOption)
		want   string
	}{
		{"retries", func(o *valkey.ClientOption) { o.DisableRetry = false }, "client: DisableRetry: is false"},
		{"dial timeout by default", func(o *valkey.ClientOption) { o.Dialer.Timeout = 0 }, "client: Dialer.Timeout: is 0, valkey-go's 5s"},
		{"dial timeout", func(o *valkey.ClientOption) { o.Dialer.Timeout = time.Second }, "client: Dialer.Timeout: is 1s, longer than the Store's timeout (100ms)"},
		{"sentinel dial timeout", func(o *valkey.ClientOption) { o.Sentinel.MasterSet = "m" }, "client: Sentinel.Dialer.Timeout: is 0"},
		{"write timeout by default", func(o *valkey.ClientOption) { o.ConnWriteTimeout = 0 }, "client: ConnWriteTimeout: is 0, valkey-go's 10s"},
		{"write timeout", func(o *valkey.ClientOption) { o.ConnWriteTimeout = time.Minute }, "client: ConnWriteTimeout: is 1m0s"},
		{"negative dial timeout", func(o *valkey.ClientOption) { o.Dialer.Timeout = -1 }, "client: Dialer.Timeout: is -1ns: negative"},
		{"negative sentinel dial timeout", func(o *valkey.ClientOption) {
			o.Sentinel.MasterSet = "m"
			o.Sentinel.Dialer.Timeout = -time.Second
		}, "client: Sentinel.Dialer.Timeout: is -1s: negative"},
		{"negative write timeout", func(o *valkey.ClientOption) { o.ConnWriteTimeout = -1 }, "client: ConnWriteTimeout: is -1ns: negative"},
		{"pipelining", func(o *valkey.ClientOption) { o.AlwaysPipelining = false }, "client: AlwaysPipelining: is false"},
		{"auto-pipelining", func(o *valkey.ClientOption) { o.DisableAutoPipelining = true }, "client: DisableAutoPipelining: is true"},
		{"replicas", func(o *valkey.ClientOption) { o.ReplicaOnly = true }, "client: ReplicaOnly"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := userOption(addrs, budget)
			tc.change(&o)
			built := false
			st, err := fleetstore.OpenDriver(FromOption(o, func(valkey.ClientOption) (valkey.Client, error) {
				built = true
				return nil, errors.New("built")
			}), "valkey://?timeout="+budget.String())
			if err == nil {
				st.Close()
				t.Fatalf("open: no error, want %q", tc.want)
			}
			if !errors.Is(err, fleetstore.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("open: got %v, want ErrInvalid with %q", err, tc.want)
			}
			if built {
				t.Fatal("the client was built")
			}
		})
	}
	for _, raw := range []string{"valkey://cache:6379", "valkey://:s3cret@", "valkey://?db=2", "memory://", "redis://"} {
		_, err := fleetstore.OpenDriver(FromOption(userOption(addrs, budget), nil), raw)
		if !errors.Is(err, fleetstore.ErrInvalid) || !strings.Contains(err.Error(), "url") || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("open %s: got %v, want ErrInvalid naming the url, without the password", strings.ReplaceAll(raw, "s3cret", "xxx"), err)
		}
	}
}

// TestFromOptionNilClient: a builder that returns neither a client nor an
// error fails the call as a failed build (ErrUnavailable, saying so),
// instead of storing a nil client that panics at the first command.
func TestFromOptionNilClient(t *testing.T) {
	t.Parallel()
	// The build fails at once: the budget is only what a busy machine
	// may take to run it.
	const budget = time.Second
	st, err := fleetstore.OpenDriver(FromOption(userOption([]string{"127.0.0.1:1"}, budget), func(valkey.ClientOption) (valkey.Client, error) {
		return nil, nil
	}), "valkey://?timeout="+budget.String())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for range 2 { // the first builds, the second meets the backoff
		_, err := st.Hit(t.Context(), []fleetstore.Charge{{Tenant: "t", Kind: "hooks", Increment: time.Millisecond, Capacity: time.Second}}, nil)
		if !errors.Is(err, fleetstore.ErrUnavailable) || !strings.Contains(err.Error(), "nil valkey.Client") {
			t.Fatalf("hit: got %v, want ErrUnavailable naming the nil client", err)
		}
	}
	if err := st.Ping(t.Context()); !errors.Is(err, fleetstore.ErrUnavailable) {
		t.Fatalf("ping: got %v, want ErrUnavailable", err)
	}
}
