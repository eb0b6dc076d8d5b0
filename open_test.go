package fleetstore_test

import (
	"context"
	"errors"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/driver"
)

// The root test binary imports no driver package, so redis, valkey,
// memcached and postgres are unknown schemes here.
func TestOpenUnknownScheme(t *testing.T) {
	t.Parallel()
	tests := []struct {
		give       string
		wantImport string
	}{
		{give: "redis://cache:6379/0", wantImport: "github.com/fleetstore/fleetstore/drivers/redis"},
		{give: "rediss://cache:6380", wantImport: "github.com/fleetstore/fleetstore/drivers/redis"},
		{give: "redis+cluster://a:7000,b:7001", wantImport: "github.com/fleetstore/fleetstore/drivers/redis"},
		{give: "valkeys://cache:6380", wantImport: "github.com/fleetstore/fleetstore/drivers/valkey"},
		{give: "memcached://h1:11211,h2:11211", wantImport: "github.com/fleetstore/fleetstore/drivers/memcached"},
		{give: "memcacheds://h1:11211", wantImport: "github.com/fleetstore/fleetstore/drivers/memcached"},
		{give: "postgres://db:5432/hooks", wantImport: "github.com/fleetstore/fleetstore/drivers/postgres"},
		{give: "postgresql://db:5432/hooks", wantImport: "github.com/fleetstore/fleetstore/drivers/postgres"},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			scheme, _, _ := strings.Cut(tt.give, "://")
			if slices.Contains(fleetstore.Drivers(), scheme) {
				t.Fatalf("scheme %q is registered in the root test binary: a driver package was imported", scheme)
			}
			st, err := fleetstore.Open(tt.give)
			if st != nil || !errors.Is(err, fleetstore.ErrUnknownScheme) {
				t.Fatalf("Open(%q) = %v, %v, want nil, ErrUnknownScheme", tt.give, st, err)
			}
			msg := err.Error()
			for _, want := range []string{`"` + scheme + `"`, "memory"} {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q does not mention %q", msg, want)
				}
			}
			// The import path, whole: not ".../drivers/rediss".
			if !regexp.MustCompile(regexp.QuoteMeta(tt.wantImport) + `($|[^a-z0-9_/+.-])`).MatchString(msg) {
				t.Errorf("error %q does not suggest importing %s", msg, tt.wantImport)
			}
			if errors.Is(err, fleetstore.ErrInvalid) {
				t.Errorf("error %q also matches ErrInvalid", msg)
			}
		})
	}
}

// TestOpenInvalid: every malformed URL or parameter is ErrInvalid naming
// the field.
func TestOpenInvalid(t *testing.T) {
	t.Parallel()
	tests := []struct {
		give      string
		wantField string // the InvalidError's field
		wantIn    string // also in the message
	}{
		{give: "memory://?timeout=abc", wantField: "url: timeout", wantIn: `"abc"`},
		{give: "memory://?timeout=0", wantField: "url: timeout"},
		{give: "memory://?timeout=-5ms", wantField: "url: timeout"},
		{give: "memory://?timeout=", wantField: "url: timeout"},
		{give: "memory://?timeout=5", wantField: "url: timeout"},
		{give: "memory://?key_prefix=", wantField: "url: key_prefix"},
		{give: "memory://?key_prefix=a%20b", wantField: "url: key_prefix"},
		{give: "memory://?key_prefix=%7Btag%7D", wantField: "url: key_prefix"},
		{give: "memory://?key_prefix=a%0Ab", wantField: "url: key_prefix"},
		{give: "memory://?key_prefix=" + strings.Repeat("p", 65), wantField: "url: key_prefix"},
		{give: "memory://?foo=1", wantField: "url: foo", wantIn: "timeout, key_prefix"},
		{give: "memory://NAME?timeout=1s&foo=1&bar=2", wantField: "url: bar"},
		{give: "memory://NAME/some/path", wantField: "url: path"},
		{give: "memory:opaque", wantField: "url"},
		{give: "no-scheme-here", wantField: "url", wantIn: "scheme"},
		{give: "://host", wantField: "url"},
		{give: "memory://%zz", wantField: "url"},
		{give: "memory://[::1", wantField: "url"},
		{give: "mem ory://x", wantField: "url"},
		{give: "memory://NAME#frag", wantField: "url", wantIn: "fragment"},
		{give: "memory://?timeout=bad&timeout=1s", wantField: "url: timeout", wantIn: "2 times"},
		{give: "memory://?key_prefix=a&key_prefix=b", wantField: "url: key_prefix", wantIn: "2 times"},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			st, err := fleetstore.Open(tt.give)
			if st != nil || !errors.Is(err, fleetstore.ErrInvalid) {
				t.Fatalf("Open(%q) = %v, %v, want nil, ErrInvalid", tt.give, st, err)
			}
			var ie *driver.InvalidError
			if !errors.As(err, &ie) {
				t.Fatalf("Open(%q): %v is not a *driver.InvalidError", tt.give, err)
			}
			if ie.Field != tt.wantField {
				t.Errorf("Open(%q): field %q, want %q (%v)", tt.give, ie.Field, tt.wantField, err)
			}
			if !strings.Contains(err.Error(), tt.wantField) || !strings.Contains(err.Error(), tt.wantIn) {
				t.Errorf("Open(%q): %q, want it to contain %q and %q", tt.give, err, tt.wantField, tt.wantIn)
			}
			if !strings.HasPrefix(err.Error(), "fleetstore: open: ") {
				t.Errorf("Open(%q): %q, want the prefix \"fleetstore: open: \"", tt.give, err)
			}
		})
	}
}

// TestOpenErrorRedacts: no error of Open repeats a password, whatever is
// wrong with the URL.
func TestOpenErrorRedacts(t *testing.T) {
	t.Parallel()
	scheme, _ := registerFake(&fakeConn{})
	for _, give := range []string{
		"nosuch://user:s3cret@host/?foo=1",
		"nosuch://:s3cret@host",
		"memory://u:s3cret@[bad",
		"memory://u:s3cret@host:port/",
		"memory://u:s3cret@host/?foo=1",
		"memory://u:s3cret@host/?timeout=bad",
		"memory://u:s3cret@host/?key_prefix=a%20b",
		"memory://u:s3cret@NAME",
		"memory://u:s3cret@NAME/path",
		"redis://default:s3cret@cache:6379/0",
		"u:s3cret@host", // no scheme
		scheme + "://u:s3cret@host/?timeout=nope",
		scheme + "://u:s3cret@host/?key_prefix=",
		scheme + "://u:s3cret@host%zz/",
	} {
		st, err := fleetstore.Open(give)
		if err == nil {
			st.Close()
			t.Errorf("Open(%q) succeeded, want an error", give)
			continue
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Open(%q): error %q contains the password", give, err)
		}
	}
}

// TestOpenUnescapedPassword: a password holding an unescaped '/', '?' or
// '#' is cut by url.Parse, and its tail becomes the path, query or
// fragment, which a driver's errors quote. Open refuses an '@' after the
// host instead, naming the URL and quoting none of it; the same password
// percent-encoded opens.
func TestOpenUnescapedPassword(t *testing.T) {
	t.Parallel()
	scheme, _ := registerFake(&fakeConn{})
	for _, pw := range []string{"sec@ret/tail", "sec@ret?tail=1", "sec@ret?x", "sec@ret#tail", "sec/ret", "sec?ret", "sec#ret"} {
		give := scheme + "://u:" + pw + "@host:1"
		st, err := fleetstore.Open(give)
		if err == nil {
			st.Close()
			t.Errorf("Open(%q) opened, want ErrInvalid", give)
			continue
		}
		if !errors.Is(err, fleetstore.ErrInvalid) {
			t.Errorf("Open(%q): %v, want ErrInvalid", give, err)
		}
		for _, piece := range []string{"sec", "ret", "tail"} {
			if strings.Contains(err.Error(), piece) {
				t.Errorf("Open(%q): error %q holds %q, a piece of the password", give, err, piece)
			}
		}
		st, err = fleetstore.Open(scheme + "://" + url.UserPassword("u", pw).String() + "@host:1")
		if err != nil {
			t.Errorf("Open with %q percent-encoded: %v", pw, err)
			continue
		}
		st.Close()
	}
}

// TestOpenConfig: what the driver receives — defaults, ?timeout=,
// ?key_prefix=, WithTimeout overriding ?timeout=, and a query without the
// common parameters.
func TestOpenConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		query       string
		opts        []fleetstore.Option
		wantTimeout time.Duration
		wantPrefix  string
		wantQuery   string
	}{
		{name: "defaults", wantTimeout: fleetstore.DefaultTimeout, wantPrefix: fleetstore.DefaultKeyPrefix},
		{name: "query", query: "?timeout=250ms&key_prefix=edge-1", wantTimeout: 250 * time.Millisecond, wantPrefix: "edge-1"},
		{name: "WithTimeout overrides the query", query: "?timeout=5s", opts: []fleetstore.Option{fleetstore.WithTimeout(7 * time.Second)},
			wantTimeout: 7 * time.Second, wantPrefix: fleetstore.DefaultKeyPrefix},
		{name: "WithTimeout without query", opts: []fleetstore.Option{fleetstore.WithTimeout(3 * time.Millisecond)},
			wantTimeout: 3 * time.Millisecond, wantPrefix: fleetstore.DefaultKeyPrefix},
		{name: "last WithTimeout wins", opts: []fleetstore.Option{fleetstore.WithTimeout(time.Second), fleetstore.WithTimeout(2 * time.Second)},
			wantTimeout: 2 * time.Second, wantPrefix: fleetstore.DefaultKeyPrefix},
		{name: "driver params kept", query: "?db=3&timeout=1s&pool=8", wantTimeout: time.Second, wantPrefix: fleetstore.DefaultKeyPrefix, wantQuery: "db=3&pool=8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			conn := &fakeConn{}
			scheme, d := registerFake(conn)
			st, err := fleetstore.Open(scheme+"://host:1234/x"+tt.query, tt.opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			cfg := d.lastConfig(t)
			if cfg.Timeout != tt.wantTimeout || cfg.KeyPrefix != tt.wantPrefix {
				t.Errorf("config timeout %v, key_prefix %q, want %v, %q", cfg.Timeout, cfg.KeyPrefix, tt.wantTimeout, tt.wantPrefix)
			}
			if cfg.URL == nil || cfg.URL.Scheme != scheme || cfg.URL.Host != "host:1234" || cfg.URL.Path != "/x" || cfg.URL.RawQuery != tt.wantQuery {
				t.Errorf("config URL %v, want %s://host:1234/x?%s", cfg.URL, scheme, tt.wantQuery)
			}
			if cfg.Logger == nil {
				t.Error("config logger is nil")
			}
			// Open did no I/O: not even a Ping.
			if n := conn.calls.Load(); n != 0 {
				t.Errorf("Open made %d driver calls, want none", n)
			}

			// The timeout is the budget each call gets.
			var deadline time.Time
			var hasDeadline bool
			conn.other = func(ctx context.Context) error {
				deadline, hasDeadline = ctx.Deadline()
				return nil
			}
			before := time.Now()
			if err := st.Ping(context.Background()); err != nil {
				t.Fatal(err)
			}
			after := time.Now()
			if !hasDeadline || deadline.Before(before.Add(tt.wantTimeout)) || deadline.After(after.Add(tt.wantTimeout)) {
				t.Errorf("ping deadline %v (set=%v), want between %v and %v", deadline, hasDeadline, before.Add(tt.wantTimeout), after.Add(tt.wantTimeout))
			}
		})
	}
}

// TestBudgetCallerDeadline: a caller deadline earlier than the store's
// timeout is the budget; a later one is cut to the timeout.
func TestBudgetCallerDeadline(t *testing.T) {
	t.Parallel()
	conn := &fakeConn{}
	st := openFake(t, conn, fleetstore.WithTimeout(time.Hour))
	var deadline time.Time
	conn.other = func(ctx context.Context) error {
		deadline, _ = ctx.Deadline()
		return nil
	}
	want := time.Now().Add(time.Minute)
	ctx, cancel := context.WithDeadline(context.Background(), want)
	defer cancel()
	if err := st.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if !deadline.Equal(want) {
		t.Errorf("driver deadline %v, want the caller's %v", deadline, want)
	}

	st2 := openFake(t, conn, fleetstore.WithTimeout(time.Second))
	ctx, cancel = context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	before := time.Now()
	if err := st2.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if deadline.After(time.Now().Add(time.Second)) || deadline.Before(before.Add(time.Second)) {
		t.Errorf("driver deadline %v, want now+1s (the store's timeout)", deadline)
	}
}

func TestWithTimeoutInvalid(t *testing.T) {
	t.Parallel()
	for _, d := range []time.Duration{0, -time.Nanosecond, -time.Second} {
		// WithTimeout also overrides a valid ?timeout=.
		st, err := fleetstore.Open("memory://?timeout=1s", fleetstore.WithTimeout(d))
		if st != nil || !errors.Is(err, fleetstore.ErrInvalid) || !strings.Contains(err.Error(), "timeout") {
			t.Errorf("Open with WithTimeout(%v) = %v, %v, want nil, ErrInvalid naming timeout", d, st, err)
		}
	}
}

// TestWithLogger: the default logger is a no-op; WithLogger's logger
// reaches the driver and the Store logs to it, never a password.
func TestWithLogger(t *testing.T) {
	t.Parallel()
	// Default: a logger that enables no level.
	sch, d := registerFake(&fakeConn{})
	for _, opts := range [][]fleetstore.Option{nil, {fleetstore.WithLogger(nil)}} {
		st, err := fleetstore.Open(sch+"://", opts...)
		if err != nil {
			t.Fatal(err)
		}
		cfg := d.lastConfig(t)
		for _, l := range []zapcore.Level{zapcore.DebugLevel, zapcore.InfoLevel, zapcore.ErrorLevel, zapcore.FatalLevel} {
			if cfg.Logger.Core().Enabled(l) {
				t.Errorf("default logger enables %v, want a no-op logger", l)
			}
		}
		st.Close()
	}

	core, logs := observer.New(zapcore.DebugLevel)
	logger := zap.New(core)
	st, err := fleetstore.Open(sch+"://user:s3cret@host:1/", fleetstore.WithLogger(logger))
	if err != nil {
		t.Fatal(err)
	}
	if got := d.lastConfig(t).Logger; got != logger {
		t.Errorf("driver got logger %p, want the one given to WithLogger %p", got, logger)
	}
	st.Close()
	if logs.Len() == 0 {
		t.Fatal("nothing logged at debug level by Open and Close")
	}
	for _, e := range logs.All() {
		for k, v := range e.ContextMap() {
			if strings.Contains(e.Message, "s3cret") || strings.Contains(toString(v), "s3cret") {
				t.Errorf("log %q field %s=%v contains the password", e.Message, k, v)
			}
		}
	}
}

func toString(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return ""
}

// TestOpenMemory: Open of the built-in driver returns a working Store.
func TestOpenMemory(t *testing.T) {
	t.Parallel()
	for _, give := range []string{"memory://", "memory:///", "memory://name-of-test?timeout=20ms&key_prefix=p"} {
		st, err := fleetstore.Open(give)
		if err != nil {
			t.Fatalf("Open(%q): %v", give, err)
		}
		if err := st.Ping(context.Background()); err != nil {
			t.Errorf("Ping on %q: %v", give, err)
		}
		if err := st.Close(); err != nil {
			t.Errorf("Close on %q: %v", give, err)
		}
	}
}

// TestOpenHostList: a comma-separated host list reaches the driver whole,
// whatever net/url thinks of its ports (memcached://h1:11211,h2).
func TestOpenHostList(t *testing.T) {
	t.Parallel()
	for _, hosts := range []string{"h1:11211,h2", "[::1]:1,127.0.0.1:2", "127.0.0.1:1,[::1]:2", "a,b,c"} {
		conn := &fakeConn{}
		scheme, d := registerFake(conn)
		st, err := fleetstore.Open(scheme + "://" + hosts + "/?timeout=1s")
		if err != nil {
			t.Fatalf("open %s: %v", hosts, err)
		}
		st.Close()
		if got := d.lastConfig(t).URL.Host; got != hosts {
			t.Errorf("driver got host %q, want %q", got, hosts)
		}
	}
	// Anything else wrong with the authority is still refused.
	for _, give := range []string{"memory://h 1,h2", "memory://h1,h2\x01"} {
		if _, err := fleetstore.Open(give); !errors.Is(err, fleetstore.ErrInvalid) {
			t.Errorf("Open(%q): %v, want ErrInvalid", give, err)
		}
	}
}
