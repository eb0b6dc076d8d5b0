package fleetstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/drivers/memory"
)

// TestOpenDriver: a Store on a driver value, no scheme registered, with
// the common parameters parsed as by Open and the driver given back by
// Store.Driver.
func TestOpenDriver(t *testing.T) {
	t.Parallel()
	d := memory.New(nil)
	st, err := fleetstore.OpenDriver(d, "anything-unregistered://node?timeout=7ms")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if got := st.Driver(); got != driver.Driver(d) {
		t.Errorf("the Store's driver = %v, want the driver given", got)
	}
	if res, err := st.Hit(context.Background(), []fleetstore.Charge{testCharge}, nil); err != nil || res.Outcome != fleetstore.OK {
		t.Errorf("hit: %+v %v", res, err)
	}
	if _, err := fleetstore.Open("anything-unregistered://node"); !errors.Is(err, fleetstore.ErrUnknownScheme) {
		t.Errorf("Open of the same URL: %v, want ErrUnknownScheme (OpenDriver registers nothing)", err)
	}
	for _, give := range []string{"anything://?timeout=-1s", "anything://?nope=1", "://"} {
		if _, err := fleetstore.OpenDriver(d, give); !errors.Is(err, fleetstore.ErrInvalid) {
			t.Errorf("OpenDriver(%q): %v, want ErrInvalid", give, err)
		}
	}
	if _, err := fleetstore.OpenDriver(nil, "memory://"); !errors.Is(err, fleetstore.ErrInvalid) || !strings.Contains(err.Error(), "driver") {
		t.Errorf("OpenDriver(nil): %v, want ErrInvalid naming the driver", err)
	}
	fake := &fakeDriver{conn: &fakeConn{}}
	st2, err := fleetstore.OpenDriver(fake, "fake://h?timeout=7ms&key_prefix=p&x=1")
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	cfg := fake.lastConfig(t)
	if cfg.Timeout != 7*time.Millisecond || cfg.KeyPrefix != "p" || cfg.URL.RawQuery != "x=1" || cfg.URL.Scheme != "fake" {
		t.Errorf("driver got %+v (URL %s), want timeout 7ms, key_prefix p, query x=1", cfg, cfg.URL)
	}
}

// TestReleaseNeedsNoTTL: Release uses no TTL and demands none; Commit
// demands its TTL but not the pending one.
func TestReleaseNeedsNoTTL(t *testing.T) {
	t.Parallel()
	st := openFake(t, &fakeConn{})
	bare := fleetstore.Claim{Tenant: "acme", SourceID: "github", Key: "d-1", HookID: "h-1"}
	if err := st.Release(context.Background(), bare); err != nil {
		t.Errorf("release without TTLs: %v", err)
	}
	if err := st.Commit(context.Background(), bare); !errors.Is(err, fleetstore.ErrInvalid) || !strings.Contains(err.Error(), "claims[0].ttl") {
		t.Errorf("commit without a TTL: %v, want ErrInvalid naming claims[0].ttl", err)
	}
	bare.TTL = time.Hour
	if err := st.Commit(context.Background(), bare); err != nil {
		t.Errorf("commit with a TTL and no pending TTL: %v", err)
	}
}

// TestCallerDeadlineIsTheBudget: when the caller's deadline is sooner than
// the store's timeout, the driver gets the caller's context itself (no
// timer of the Store's); otherwise one bounded by the timeout.
func TestCallerDeadlineIsTheBudget(t *testing.T) {
	t.Parallel()
	var got context.Context
	st := openFake(t, &fakeConn{other: func(ctx context.Context) error { got = ctx; return nil }}, fleetstore.WithTimeout(time.Hour))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := st.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if got != ctx {
		t.Errorf("driver got a new context under a sooner caller deadline")
	}
	st2 := openFake(t, &fakeConn{other: func(ctx context.Context) error { got = ctx; return nil }}, fleetstore.WithTimeout(time.Second))
	if err := st2.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if dl, ok := got.Deadline(); got == ctx || !ok || time.Until(dl) > time.Second {
		t.Errorf("driver's deadline %v is not the store's 1s timeout", dl)
	}
}

// TestOutageLoggedOnce: the Store, not the driver, logs an outage: one
// warning when calls start failing unanswered, one info line at the next
// answer, whatever the driver; error replies and the caller's own
// cancellation are no outage; nothing is logged per call.
func TestOutageLoggedOnce(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zapcore.InfoLevel) // not Open's debug line
	var mode atomic.Int32                         // 0 ok, 1 refused, 2 error reply
	refused := fmt.Errorf("dial tcp 127.0.0.1:1: %w", syscall.ECONNREFUSED)
	fail := func(ctx context.Context) error {
		switch mode.Load() {
		case 1:
			return refused
		case 2:
			return driver.ErrorReply(errors.New("ERR wrong number of arguments"))
		}
		return nil
	}
	st := openFake(t, &fakeConn{other: fail, commit: func(ctx context.Context, cs []driver.Claim) ([]error, error) {
		return make([]error, len(cs)), fail(ctx)
	}}, fleetstore.WithLogger(zap.New(core)))
	ctx := context.Background()
	count := func(substr string) int {
		n := 0
		for _, e := range logs.All() {
			if strings.Contains(e.Message, substr) {
				n++
			}
		}
		return n
	}
	mode.Store(2)
	for range 3 {
		err := st.Ping(ctx)
		var re *driver.ReplyError
		if !errors.Is(err, fleetstore.ErrUnavailable) || !errors.As(err, &re) || errors.Is(err, fleetstore.ErrTimeout) {
			t.Fatalf("error reply: %v, want ErrUnavailable with the ReplyError", err)
		}
	}
	if n := logs.Len(); n != 0 {
		t.Fatalf("error replies logged %d lines, want none (the store answered)", n)
	}
	mode.Store(1)
	for range 5 {
		if err := st.Ping(ctx); !errors.Is(err, fleetstore.ErrUnavailable) {
			t.Fatalf("refused: %v, want ErrUnavailable", err)
		}
		if err := st.Commit(ctx, testClaim); !errors.Is(err, fleetstore.ErrUnavailable) {
			t.Fatalf("refused commit: %v, want ErrUnavailable", err)
		}
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_ = st.Ping(cancelled)
	if n := count("unreachable"); n != 1 {
		t.Errorf("%d 'unreachable' lines for one outage, want 1", n)
	}
	mode.Store(0)
	// An answer right after the last unanswered call ends nothing: it may
	// be a partial outage. Once quiet for a second, the next answer does.
	if err := st.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if n := count("reachable again"); n != 0 {
		t.Errorf("%d 'reachable again' lines at once after the outage, want none yet", n)
	}
	later := time.Now().Add(2 * time.Second)
	fleetstore.SetNow(st, func() time.Time { return later })
	for range 3 {
		if err := st.Ping(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := count("reachable again"); n != 1 {
		t.Errorf("%d 'reachable again' lines, want 1", n)
	}
	if n := logs.Len(); n != 2 {
		t.Errorf("%d log lines for one outage and its end, want 2: %v", n, logs.All())
	}
	for _, e := range logs.All() {
		if e.ContextMap()["scheme"] != "fake" {
			t.Errorf("%q: fields %v, want scheme=fake", e.Message, e.ContextMap())
		}
	}
}

// TestPartialOutageLoggedOnce: a store that fails some calls unanswered
// and answers others (one cluster master or one memcached server down)
// logs one warning, not one line per call; its end is logged once no call
// has gone unanswered for a second.
func TestPartialOutageLoggedOnce(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zapcore.InfoLevel)
	var n atomic.Int64
	refused := fmt.Errorf("dial tcp 127.0.0.1:1: %w", syscall.ECONNREFUSED)
	st := openFake(t, &fakeConn{other: func(context.Context) error {
		if n.Add(1)%3 == 0 {
			return refused
		}
		return nil
	}}, fleetstore.WithLogger(zap.New(core)))
	clock := time.Now()
	fleetstore.SetNow(st, func() time.Time { return clock })
	for range 99 {
		_ = st.Ping(context.Background())
		clock = clock.Add(10 * time.Millisecond)
	}
	if got := logs.Len(); got != 1 {
		t.Fatalf("%d lines for a partial outage of 33 failures in 99 calls, want 1: %v", got, logs.All())
	}
	n.Store(1) // no more failures for two calls; then quiet
	clock = clock.Add(2 * time.Second)
	_ = st.Ping(context.Background())
	if got := logs.Len(); got != 2 || !strings.Contains(logs.All()[1].Message, "reachable again") {
		t.Errorf("after a quiet second: %d lines %v, want the end logged once", got, logs.All())
	}
}

// TestCancelledHidesSentinels: a call the caller cancelled matches
// context.Canceled and no sentinel, even when the driver marked its error
// ErrUnavailable or ErrTimeout; errors.As still finds the driver's error.
func TestCancelledHidesSentinels(t *testing.T) {
	t.Parallel()
	custom := &storeErr{code: 3}
	for _, mark := range []error{fleetstore.ErrUnavailable, fleetstore.ErrTimeout} {
		ctx, cancel := context.WithCancel(context.Background())
		st := openFake(t, &fakeConn{other: func(context.Context) error {
			cancel()
			return fmt.Errorf("%w: %w", mark, custom)
		}})
		err := st.Ping(ctx)
		var got *storeErr
		if !errors.Is(err, context.Canceled) || errors.Is(err, fleetstore.ErrUnavailable) || errors.Is(err, fleetstore.ErrTimeout) || !errors.As(err, &got) {
			t.Errorf("driver marked %v, caller cancelled: %v (canceled %v, unavailable %v, timeout %v, as %v)", mark, err,
				errors.Is(err, context.Canceled), errors.Is(err, fleetstore.ErrUnavailable), errors.Is(err, fleetstore.ErrTimeout), got != nil)
		}
	}
}

// TestOpenDriverNil: a typed nil driver, or a driver whose Open returns no
// Conn and no error, is an error at Open, not a panic at the first call.
func TestOpenDriverNil(t *testing.T) {
	t.Parallel()
	var typed *memory.Driver
	if _, err := fleetstore.OpenDriver(typed, "memory://"); !errors.Is(err, fleetstore.ErrInvalid) {
		t.Errorf("typed nil driver: %v, want ErrInvalid", err)
	}
	if _, err := fleetstore.OpenDriver(nilConnDriver{}, "x://"); err == nil {
		t.Error("a driver returning (nil, nil): no error")
	}
}

type nilConnDriver struct{}

func (nilConnDriver) Open(driver.Config) (driver.Conn, error) { return nil, nil }
