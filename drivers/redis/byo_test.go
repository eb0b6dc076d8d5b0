package redis

import (
	"errors"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/conformance"
	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/internal/scripts"
	"github.com/fleetstore/fleetstore/internal/testing/testserver"
)

// userOptions are the settings an application gives its own client for
// FromClient: the four the contract needs, everything else go-redis's
// defaults (a 5s read timeout among them).
func userOptions(addr string, budget time.Duration) *goredis.Options {
	return &goredis.Options{
		Addr:                  addr,
		ContextTimeoutEnabled: true,
		MaxRetries:            -1,
		DialerRetries:         1,
		DialTimeout:           budget,
	}
}

// userClusterOptions are userOptions for a cluster client.
func userClusterOptions(addrs []string, budget time.Duration) *goredis.ClusterOptions {
	return &goredis.ClusterOptions{
		Addrs:                 addrs,
		ContextTimeoutEnabled: true,
		MaxRetries:            -1,
		DialerRetries:         1,
		DialTimeout:           budget,
		ReadTimeout:           budget, // the slot-map reload's bound
	}
}

// userClients is a driver that does what an application does for each
// Store: build its own client for the URL's server (a cluster client for
// redis+cluster://), open the Store on it with FromClient and a URL of
// common parameters only, and close the client after the Store. The
// conformance suite aims it at its own listeners through the URL.
// guarded: the client dials through Dialer.
type userClients struct{ guarded bool }

func (userClients) ExpiryGranularity() time.Duration { return 2 * time.Millisecond }

func (d userClients) Open(cfg driver.Config) (driver.Conn, error) {
	u := *cfg.URL
	q := u.Query()
	addrs := append([]string{u.Host}, q["addr"]...)
	q.Del("addr")
	u.Host, u.Path, u.RawQuery = "", "", q.Encode()
	var c goredis.UniversalClient
	if cfg.URL.Scheme == "redis+cluster" {
		o := userClusterOptions(addrs, cfg.Timeout)
		if d.guarded {
			o.Dialer = Dialer(&goredis.Options{DialTimeout: o.DialTimeout})
		}
		c = goredis.NewClusterClient(o)
	} else {
		o := userOptions(cfg.URL.Host, cfg.Timeout)
		if d.guarded {
			o.Dialer = Dialer(o)
		}
		c = goredis.NewClient(o)
	}
	cfg.URL = &u
	conn, err := FromClient(c).Open(cfg)
	if err != nil {
		c.Close()
		return nil, err
	}
	return ownedConn{conn, c}, nil
}

// ownedConn closes the application's client after the Store's Conn, as
// the application would after Store.Close.
type ownedConn struct {
	driver.Conn
	c goredis.UniversalClient
}

func (c ownedConn) Close() error { return errors.Join(c.Conn.Close(), c.c.Close()) }

// TestConformanceFromClient runs the whole conformance suite on Stores
// opened with FromClient on clients built as an application builds them,
// dialing through Dialer, on one redis-server.
func TestConformanceFromClient(t *testing.T) {
	t.Parallel()
	srv := testserver.StartRedis(t)
	conformance.Run(t, conformance.Config{
		Driver:       userClients{guarded: true},
		URL:          srv.URL(),
		Records:      records(adminClient(t, "", srv.Addr)),
		Restart:      srv.Restart,
		FlushScripts: srv.FlushScripts,
	})
}

// TestConformanceFromClusterClient runs the conformance suite on Stores
// opened with FromClient on plain cluster clients (go-redis's own dialer)
// of a three-master cluster. V4 does not hold on a client that does not
// dial through Dialer: go-redis allocates what a lying server declares.
func TestConformanceFromClusterClient(t *testing.T) {
	t.Parallel()
	cl := testserver.StartCluster(t)
	conformance.Run(t, conformance.Config{
		Driver:       userClients{},
		URL:          cl.URL(),
		AddrURL:      func(addr string) string { return "redis+cluster://" + addr },
		Records:      records(adminClient(t, "", cl.Addrs()...)),
		Restart:      cl.Restart,
		FlushScripts: cl.FlushScripts,
		Omit:         map[string]string{"V4": "a client not dialing through redis.Dialer parses what a lying server declares (FromClient's doc)"},
	})
}

// TestFromClientRefuses: each client setting that would break the
// contract is refused at Open with ErrInvalid naming it, and a URL that
// holds what the client holds is refused too. Nothing is dialed: the
// address is refused, and Open fails before any call.
func TestFromClientRefuses(t *testing.T) {
	t.Parallel()
	const budget = 100 * time.Millisecond
	addr := "127.0.0.1:1"
	for _, tc := range []struct {
		name   string
		client func() goredis.UniversalClient
		url    string
		want   string // in the error
	}{
		{"context timeout", func() goredis.UniversalClient {
			o := userOptions(addr, budget)
			o.ContextTimeoutEnabled = false
			return goredis.NewClient(o)
		}, "", `client: ContextTimeoutEnabled: is false`},
		{"retries by default", func() goredis.UniversalClient {
			o := userOptions(addr, budget)
			o.MaxRetries = 0 // go-redis: 3
			return goredis.NewClient(o)
		}, "", `client: MaxRetries: is 3`},
		{"retries", func() goredis.UniversalClient {
			o := userOptions(addr, budget)
			o.MaxRetries = 2
			return goredis.NewClient(o)
		}, "", `client: MaxRetries: is 2`},
		{"cluster retries", func() goredis.UniversalClient {
			o := userClusterOptions([]string{addr}, budget)
			o.MaxRetries = 1
			return goredis.NewClusterClient(o)
		}, "", `client: MaxRetries: is 1`},
		{"dial retries by default", func() goredis.UniversalClient {
			o := userOptions(addr, budget)
			o.DialerRetries = 0 // go-redis: 5
			return goredis.NewClient(o)
		}, "", `client: DialerRetries: is 5`},
		{"cluster dial retries", func() goredis.UniversalClient {
			o := userClusterOptions([]string{addr}, budget)
			o.DialerRetries = 0
			return goredis.NewClusterClient(o)
		}, "", `client: DialerRetries: is 5`},
		{"dial timeout by default", func() goredis.UniversalClient {
			o := userOptions(addr, budget)
			o.DialTimeout = 0 // go-redis: 5s
			return goredis.NewClient(o)
		}, "", `client: DialTimeout: is 5s, longer than the Store's timeout (100ms)`},
		{"cluster dial timeout", func() goredis.UniversalClient {
			o := userClusterOptions([]string{addr}, budget)
			o.DialTimeout = time.Second
			return goredis.NewClusterClient(o)
		}, "", `client: DialTimeout: is 1s`},
		{"no read deadline", func() goredis.UniversalClient {
			o := userOptions(addr, budget)
			o.ReadTimeout = -2
			return goredis.NewClient(o)
		}, "", `client: ReadTimeout: is -2`},
		{"no write deadline", func() goredis.UniversalClient {
			o := userOptions(addr, budget)
			o.WriteTimeout = -2
			return goredis.NewClient(o)
		}, "", `client: WriteTimeout: is -2`},
		{"cluster read timeout by default", func() goredis.UniversalClient {
			o := userClusterOptions([]string{addr}, budget)
			o.ReadTimeout = 0 // go-redis: 5s
			return goredis.NewClusterClient(o)
		}, "", `client: ReadTimeout: is 5s`},
		{"cluster write timeout", func() goredis.UniversalClient {
			o := userClusterOptions([]string{addr}, budget)
			o.WriteTimeout = time.Second
			return goredis.NewClusterClient(o)
		}, "", `client: WriteTimeout: is 1s`},
		{"cluster no read deadline", func() goredis.UniversalClient {
			o := userClusterOptions([]string{addr}, budget)
			o.ReadTimeout = -2
			return goredis.NewClusterClient(o)
		}, "", `client: ReadTimeout: is -2`},
		{"cluster read timeout -1", func() goredis.UniversalClient {
			o := userClusterOptions([]string{addr}, budget)
			o.ReadTimeout = -1 // ClusterOptions: 0, no deadline
			return goredis.NewClusterClient(o)
		}, "", `client: ReadTimeout: is -1`},
		{"cluster write timeout -1", func() goredis.UniversalClient {
			o := userClusterOptions([]string{addr}, budget)
			o.WriteTimeout = -1
			return goredis.NewClusterClient(o)
		}, "", `client: WriteTimeout: is -1`},
		{"negative dial timeout", func() goredis.UniversalClient {
			o := userOptions(addr, budget)
			o.DialTimeout = -1
			return goredis.NewClient(o)
		}, "", `client: DialTimeout: is -1ns`},
		{"cluster negative dial timeout", func() goredis.UniversalClient {
			o := userClusterOptions([]string{addr}, budget)
			o.DialTimeout = -time.Second
			return goredis.NewClusterClient(o)
		}, "", `client: DialTimeout: is -1s`},
		{"ring", func() goredis.UniversalClient {
			return goredis.NewRing(&goredis.RingOptions{Addrs: map[string]string{"a": addr}})
		}, "", `client: a *redis.Ring`},
		{"nil", func() goredis.UniversalClient { return nil }, "", `client: is nil`},
		{"host in the URL", func() goredis.UniversalClient { return goredis.NewClient(userOptions(addr, budget)) },
			"redis://cache:6379", `url: a Store on your own client takes its servers from the client`},
		{"password in the URL", func() goredis.UniversalClient { return goredis.NewClient(userOptions(addr, budget)) },
			"redis://:s3cret@", `url: a Store on your own client`},
		{"memory scheme", func() goredis.UniversalClient { return goredis.NewClient(userOptions(addr, budget)) },
			"memory://", `url: scheme: "memory" is not this client's: want redis, rediss, redis+cluster`},
		{"valkey scheme", func() goredis.UniversalClient { return goredis.NewClient(userOptions(addr, budget)) },
			"valkey://", `url: scheme`},
		{"client parameter in the URL", func() goredis.UniversalClient { return goredis.NewClient(userOptions(addr, budget)) },
			"redis://?pool_size=3", `url: pool_size: unknown parameter`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.client()
			if c != nil {
				defer c.Close()
			}
			raw := tc.url
			if raw == "" {
				raw = "redis://"
			}
			sep := "?"
			if strings.Contains(raw, "?") {
				sep = "&"
			}
			st, err := fleetstore.OpenDriver(FromClient(c), raw+sep+"timeout="+budget.String())
			if err == nil {
				st.Close()
				t.Fatalf("open: no error, want %q", tc.want)
			}
			if !errors.Is(err, fleetstore.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("open: got %v, want ErrInvalid with %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Fatalf("error holds the password: %v", err)
			}
		})
	}
}

// TestFromClientKeepsClient: Store.Close leaves the application's client
// open and working, for its own commands and for another Store on it;
// every setting FromClient does not refuse (a 5s read timeout, a pool of
// 3) stays the application's.
func TestFromClientKeepsClient(t *testing.T) {
	t.Parallel()
	srv := testserver.StartRedis(t)
	// A budget of 5s: the first Hit dials and loads the library, which a
	// loaded machine made take over 1s; the budget is not what is tested.
	o := userOptions(srv.Addr, 5*time.Second)
	o.PoolSize = 3
	rdb := goredis.NewClient(o)
	t.Cleanup(func() { rdb.Close() })
	d := FromClient(rdb)
	a, err := fleetstore.OpenDriver(d, "redis://?timeout=5s&key_prefix=byo-a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := fleetstore.OpenDriver(d, "redis://?timeout=5s&key_prefix=byo-b")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	mustHit(t, a, []fleetstore.Charge{hooks("t")}, claim("t", "s", "k", "h"), fleetstore.OK)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(ctx(t), "app-key", "v", time.Minute).Err(); err != nil {
		t.Fatalf("the application's own command after Store.Close: %v", err)
	}
	mustHit(t, b, []fleetstore.Charge{hooks("t")}, claim("t", "s", "k", "h"), fleetstore.OK)
	if n, err := rdb.Eval(ctx(t), scripts.Present.Source, scripts.PresentCall("byo-a", []driver.Claim{*claim("t", "s", "k", "h")})).Int64Slice(); err != nil || len(n) != 1 {
		t.Fatalf("the first Store's claim on the shared server: present %v, %v", n, err)
	}
	if got := b.Driver(); got != d {
		t.Fatalf("the Store's driver = %v, want the FromClient driver", got)
	}
}

// TestFromClientTypedNil: a nil *Client or *ClusterClient in the
// interface is refused naming the client, not a panic in Open.
func TestFromClientTypedNil(t *testing.T) {
	t.Parallel()
	for _, c := range []goredis.UniversalClient{(*goredis.Client)(nil), (*goredis.ClusterClient)(nil)} {
		st, err := fleetstore.OpenDriver(FromClient(c), "redis://?timeout=100ms")
		if err == nil {
			st.Close()
			t.Fatalf("%T: open: no error", c)
		}
		if !errors.Is(err, fleetstore.ErrInvalid) || !strings.Contains(err.Error(), "client: is a nil") {
			t.Errorf("%T: open: got %v, want ErrInvalid naming client", c, err)
		}
	}
}
