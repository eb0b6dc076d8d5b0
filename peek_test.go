package fleetstore_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/drivers/memory"
	"github.com/fleetstore/fleetstore/observe"
)

// stepClock is a memory.Clock the test moves.
type stepClock struct{ us atomic.Int64 }

func newStepClock() *stepClock {
	c := &stepClock{}
	c.us.Store(time.Now().UnixMicro())
	return c
}

func (c *stepClock) now() int64           { return c.us.Load() }
func (c *stepClock) step(d time.Duration) { c.us.Add(d.Microseconds()) }

// TestPeek: a Peek on the memory driver reports the buckets as they stand
// (G10's reset-after and headroom, in units through Limit), answers the
// outcome a Hit of one unit of each limit would have, charges nothing,
// writes nothing, and reads its tenant's buckets alone (CONTRACT G11).
func TestPeek(t *testing.T) {
	t.Parallel()
	clock := newStepClock()
	d := memory.New(clock.now)
	st, err := fleetstore.OpenDriver(d, "memory://peek?key_prefix=peek")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	hooks := fleetstore.MustLimit(fleetstore.PerSecond(fleetstore.Hooks, 1, 5))         // 1s, 5s
	body := fleetstore.MustLimit(fleetstore.NewByteLimit(fleetstore.Bytes, 1000, 4000)) // 1ms a byte, 4s
	peek := func(what, tenant string) fleetstore.Result {
		t.Helper()
		res, err := st.Peek(ctx, tenant, hooks, body)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if q := res.Quota(); len(q) != 2 || q[0].Kind != fleetstore.Hooks || q[1].Kind != fleetstore.Bytes || res.Local {
			t.Fatalf("%s: %+v, want the states of hooks then bytes, not local", what, res)
		}
		return res
	}
	// want checks res against the outcome and retry-after, each bucket's
	// reset-after and units left.
	want := func(what string, res fleetstore.Result, o fleetstore.Outcome, retry time.Duration,
		reset [2]time.Duration, left [2]int64, denied [2]bool) {
		t.Helper()
		if res.Outcome != o || res.RetryAfter != retry {
			t.Errorf("%s: %v retry %v, want %v retry %v", what, res.Outcome, res.RetryAfter, o, retry)
		}
		for i, l := range []fleetstore.Limit{hooks, body} {
			b := res.Quota()[i]
			if b.ResetAfter != reset[i] || b.Headroom != l.Capacity()-reset[i] || l.Remaining(b) != left[i] || b.Denied != denied[i] {
				t.Errorf("%s: %s %+v (%d left), want reset-after %v, %d left, denied %v", what, b.Kind, b, l.Remaining(b), reset[i], left[i], denied[i])
			}
		}
	}

	res := peek("a fresh tenant", "acme")
	want("a fresh tenant", res, fleetstore.OK, 0, [2]time.Duration{}, [2]int64{5, 4000}, [2]bool{})
	if recs, _ := d.Records(ctx, "peek", "acme"); len(recs) != 0 {
		t.Errorf("a peek of a fresh tenant left records %v", recs)
	}

	charged := []fleetstore.Charge{hooks.Charge("acme", 1), body.Charge("acme", 1500)}
	if res, err := st.Hit(ctx, charged, nil); err != nil || res.Outcome != fleetstore.OK {
		t.Fatalf("hit: %+v %v", res, err)
	}
	before, _ := d.Records(ctx, "peek", "acme")
	for range 3 {
		res = peek("after a hit", "acme")
		want("after a hit", res, fleetstore.OK, 0, [2]time.Duration{time.Second, 1500 * time.Millisecond}, [2]int64{4, 2500}, [2]bool{})
	}
	if after, _ := d.Records(ctx, "peek", "acme"); len(after) != 1 || len(before) != 1 || after[0] != before[0] {
		t.Errorf("records %v before the peeks, %v after: a peek writes nothing", before, after)
	}
	want("another tenant", peek("another tenant", "acme2"), fleetstore.OK, 0, [2]time.Duration{}, [2]int64{5, 4000}, [2]bool{})

	// Drain hooks: the peeks charged nothing, so 4 of 5 more conform.
	n := 0
	for range 5 {
		if res, _ := st.Hit(ctx, charged[:1], nil); res.Outcome == fleetstore.OK {
			n++
		}
	}
	if n != 4 {
		t.Fatalf("%d of 5 hits after the peeks conformed, want 4 (the peeks charged nothing)", n)
	}
	clock.step(300 * time.Millisecond)
	res = peek("drained", "acme")
	want("drained", res, fleetstore.RateLimited, 700*time.Millisecond,
		[2]time.Duration{4700 * time.Millisecond, 1200 * time.Millisecond}, [2]int64{0, 2800}, [2]bool{true, false})
	// The Peek foretold the Hit's answer.
	hit, err := st.Hit(ctx, []fleetstore.Charge{hooks.Charge("acme", 1), body.Charge("acme", 1)}, nil)
	if err != nil || hit.Outcome != res.Outcome || hit.RetryAfter != res.RetryAfter || hit.Quota()[0] != res.Quota()[0] || hit.Quota()[1] != res.Quota()[1] {
		t.Errorf("hit %+v %v, want what the peek said: %+v", hit, err, res)
	}
	clock.step(700 * time.Millisecond)
	want("a unit later", peek("a unit later", "acme"), fleetstore.OK, 0,
		[2]time.Duration{4 * time.Second, 500 * time.Millisecond}, [2]int64{1, 3500}, [2]bool{})

	// No limits: OK with no states, no driver call needed.
	if res, err := st.Peek(ctx, "acme"); err != nil || res.Outcome != fleetstore.OK || len(res.Quota()) != 0 {
		t.Errorf("peek of no limits: %+v %v, want OK without states", res, err)
	}
}

// TestPeekInvalid: bad arguments are ErrInvalid naming the field, before
// any driver call, and before whether the driver can peek (CONTRACT V1).
func TestPeekInvalid(t *testing.T) {
	t.Parallel()
	five := make([]fleetstore.Limit, fleetstore.MaxCharges+1)
	for i := range five {
		five[i] = fleetstore.MustLimit(fleetstore.PerSecond(fleetstore.Kind("k"+string(rune('a'+i))), 1, 1))
	}
	for _, tc := range []struct {
		field  string
		tenant string
		limits []fleetstore.Limit
	}{
		{"tenant", "", []fleetstore.Limit{testLimit}},
		{"tenant", strings.Repeat("t", 1025), []fleetstore.Limit{testLimit}},
		{"limits", "acme", five},
		{"limits[1]", "acme", []fleetstore.Limit{testLimit, {}}},
		{"limits[0]", "acme", []fleetstore.Limit{{}}},
		{"limits[1].kind", "acme", []fleetstore.Limit{testLimit, testLimit}},
	} {
		conn := &fakeConn{}
		for name, st := range map[string]*fleetstore.Store{"peeker": openFake(t, conn), "no peeker": openNoPeek(t, conn)} {
			_, err := st.Peek(context.Background(), tc.tenant, tc.limits...)
			var ie *fleetstore.InvalidError
			if !errors.As(err, &ie) || ie.Field != tc.field || errors.Is(err, errors.ErrUnsupported) {
				t.Errorf("%s: peek with a bad %s: %v, want ErrInvalid naming it", name, tc.field, err)
			}
		}
		if n := conn.calls.Load(); n != 0 {
			t.Errorf("bad %s: %d driver calls, want none", tc.field, n)
		}
	}
	// The largest valid arguments.
	st := openFake(t, &fakeConn{})
	if _, err := st.Peek(context.Background(), strings.Repeat("t", 1024), five[:fleetstore.MaxCharges]...); err != nil {
		t.Errorf("peek of a 1024-byte tenant's %d limits: %v", fleetstore.MaxCharges, err)
	}
}

// noPeek is a driver.Conn without the optional driver.Peeker.
type noPeek struct{ driver.Conn }

func openNoPeek(t *testing.T, conn *fakeConn) *fleetstore.Store {
	t.Helper()
	st, err := fleetstore.OpenDriver(driverFunc(func(driver.Config) (driver.Conn, error) {
		return noPeek{conn}, nil
	}), "nopeek://")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

type driverFunc func(driver.Config) (driver.Conn, error)

func (f driverFunc) Open(cfg driver.Config) (driver.Conn, error) { return f(cfg) }

// TestPeekUnsupported: a Store whose driver has no driver.Peeker answers
// every Peek with errors.ErrUnsupported (also one of no limits, which says
// so without a round trip), naming the scheme; never as an outage.
func TestPeekUnsupported(t *testing.T) {
	t.Parallel()
	conn := &fakeConn{}
	st := openNoPeek(t, conn)
	for _, limits := range [][]fleetstore.Limit{nil, {testLimit}} {
		_, err := st.Peek(context.Background(), "acme", limits...)
		if !errors.Is(err, errors.ErrUnsupported) || errors.Is(err, fleetstore.ErrUnavailable) ||
			errors.Is(err, fleetstore.ErrInvalid) || !strings.Contains(err.Error(), "nopeek") {
			t.Errorf("peek of %d limits without driver.Peeker: %v, want errors.ErrUnsupported naming the scheme", len(limits), err)
		}
	}
	if n := conn.calls.Load(); n != 0 {
		t.Errorf("%d driver calls, want none", n)
	}
	st.Close()
	if _, err := st.Peek(context.Background(), "acme", testLimit); !errors.Is(err, fleetstore.ErrClosed) {
		t.Errorf("peek after Close: %v, want ErrClosed", err)
	}
}

// TestPeekReport: the Store reads a driver's NBuckets and reset-afters
// only, deriving the rest; a report that cannot be true is ErrUnavailable.
func TestPeekReport(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		give driver.Result
		ok   bool
	}{
		{"the driver's other fields ignored", driver.Result{Outcome: driver.Duplicate, HookID: "h", Local: true, RetryAfter: time.Hour, NBuckets: 1,
			Buckets: [driver.MaxCharges]driver.Bucket{{ResetAfter: 3 * time.Second, Headroom: time.Hour, Denied: true, Kind: "x"}, {ResetAfter: time.Second}}}, true},
		{"no state", driver.Result{}, false},
		{"two states for one limit", driver.Result{NBuckets: 2}, false},
		{"negative reset-after", driver.Result{NBuckets: 1, Buckets: [driver.MaxCharges]driver.Bucket{{ResetAfter: -time.Second}}}, false},
		{"reset-after not whole µs", driver.Result{NBuckets: 1, Buckets: [driver.MaxCharges]driver.Bucket{{ResetAfter: 1500 * time.Nanosecond}}}, false},
		{"reset-after beyond any TAT", driver.Result{NBuckets: 1, Buckets: [driver.MaxCharges]driver.Bucket{{ResetAfter: 3 * 366 * 24 * time.Hour}}}, false},
	} {
		conn := &fakeConn{peek: func(context.Context, []driver.Charge) (driver.Result, error) { return tc.give, nil }}
		res, err := openFake(t, conn).Peek(context.Background(), "acme", testLimit)
		if !tc.ok {
			if !errors.Is(err, fleetstore.ErrUnavailable) {
				t.Errorf("%s: %+v %v, want ErrUnavailable", tc.name, res, err)
			}
			continue
		}
		b := res.Quota()
		want := fleetstore.Bucket{Kind: fleetstore.Hooks, ResetAfter: 3 * time.Second, Headroom: 7 * time.Second}
		if err != nil || res.Outcome != fleetstore.OK || res.HookID != "" || res.Local || res.RetryAfter != 0 || len(b) != 1 || b[0] != want || res.Buckets[1] != (fleetstore.Bucket{}) {
			t.Errorf("%s: %+v %v, want OK with %+v alone", tc.name, res, err, want)
		}
	}
}

// TestFallbackPeek: with a fallback, a Peek is answered by the shared
// store while it answers; one that fails for an outage opens the breaker
// and is answered by the local store at this node's share, Local set, as
// is every Peek while the breaker is open; a closed breaker asks the
// shared store again (CONTRACT §8).
func TestFallbackPeek(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tt := range []struct {
		name string
		mode int32
	}{{"refused", refused}, {"silent", silent}, {"error reply", replying}} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			st := openFlaky(t, fleetstore.Fallback{Nodes: 2}) // a share of 1/2
			hooks := testLimit                                // 1s, burst 10
			if _, err := st.Hit(ctx, []fleetstore.Charge{hooks.Charge("acme", 1)}, nil); err != nil {
				t.Fatal(err)
			}
			res, err := st.Peek(ctx, "acme", hooks)
			if err != nil || res.Local || hooks.Remaining(res.Quota()[0]) != 9 {
				t.Fatalf("peek of a healthy store: %+v %v, want shared, 9 left", res, err)
			}

			st.d.set(tt.mode)
			peeks := st.d.peeks.Load()
			t0 := time.Now()
			res, err = st.Peek(ctx, "acme", hooks)
			took := time.Since(t0)
			// The local bucket is fresh: this node's share of the burst.
			if err != nil || !res.Local || res.Outcome != fleetstore.OK || hooks.Remaining(res.Quota()[0]) != 5 || res.Quota()[0].ResetAfter != 0 {
				t.Fatalf("peek on a %s store: %+v %v, want a local answer, 5 of 10 left (a share of 1/2)", tt.name, res, err)
			}
			if took > 200*time.Millisecond+schedSlack {
				t.Errorf("the peek that met the outage took %v, budget 200ms", took)
			}
			if !st.FallbackStats().Degraded {
				t.Errorf("a peek that failed for an outage left the breaker closed")
			}
			// A local Hit charges the local bucket (I' = 2s); the Peek sees it.
			if res, err := st.Hit(ctx, []fleetstore.Charge{hooks.Charge("acme", 1)}, nil); err != nil || !res.Local {
				t.Fatalf("hit while degraded: %+v %v", res, err)
			}
			res, err = st.Peek(ctx, "acme", hooks)
			if err != nil || !res.Local || hooks.Remaining(res.Quota()[0]) != 4 || res.Quota()[0].ResetAfter > 2*time.Second || res.Quota()[0].ResetAfter < time.Second {
				t.Errorf("peek after a local hit: %+v %v, want local, 4 left, reset-after about 2s", res, err)
			}
			if n := st.d.peeks.Load() - peeks; n != 1 {
				t.Errorf("%d peeks reached the shared store, want the first alone (the breaker is open)", n)
			}
			// Other errors are not local answers.
			if _, err := st.Peek(ctx, "", hooks); !errors.Is(err, fleetstore.ErrInvalid) {
				t.Errorf("invalid peek while degraded: %v", err)
			}
			cctx, cancel := context.WithCancel(ctx)
			cancel()
			if res, err := st.Peek(cctx, "acme", hooks); !errors.Is(err, context.Canceled) || res.Local {
				t.Errorf("cancelled peek while degraded: %+v %v, want context.Canceled", res, err)
			}

			st.d.set(healthy)
			if !waitFor(10*time.Second, func() bool { return !st.FallbackStats().Degraded }) {
				t.Fatal("still degraded 10s after the store is back")
			}
			res, err = st.Peek(ctx, "acme", hooks)
			if err != nil || res.Local || hooks.Remaining(res.Quota()[0]) != 9 {
				t.Errorf("peek once the store is back: %+v %v, want shared, 9 left", res, err)
			}
		})
	}
	t.Run("cancelled before an outage", func(t *testing.T) {
		t.Parallel()
		st := openFlaky(t, fleetstore.Fallback{})
		st.d.set(silent)
		// No deadline of the caller's: only its cancellation (5ms in) ends
		// the call before the Store's 200ms budget.
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go func() { time.Sleep(5 * time.Millisecond); cancel() }()
		if res, err := st.Peek(cctx, "acme", testLimit); !errors.Is(err, context.Canceled) || res.Local {
			t.Errorf("peek cancelled by its caller: %+v %v, want context.Canceled", res, err)
		}
		if st.FallbackStats().Degraded {
			t.Errorf("the caller's cancellation opened the breaker")
		}
	})
	t.Run("malformed report", func(t *testing.T) {
		t.Parallel()
		conn := &fakeConn{peek: func(context.Context, []driver.Charge) (driver.Result, error) {
			return driver.Result{NBuckets: 3}, nil
		}}
		st := openFake(t, conn, fleetstore.WithFallback(fleetstore.Fallback{Nodes: 2}))
		res, err := st.Peek(ctx, "acme", testLimit)
		if err != nil || !res.Local || testLimit.Remaining(res.Quota()[0]) != 5 {
			t.Errorf("peek of a store answering nonsense: %+v %v, want a local answer", res, err)
		}
	})
}

// TestObserverPeek: a Peek is told once, as OpPeek with its limits'
// count, error class and whether it was answered locally.
func TestObserverPeek(t *testing.T) {
	t.Parallel()
	r := &recorder{}
	st := openFlaky(t, fleetstore.Fallback{}, fleetstore.WithObserver(r))
	ctx := context.Background()
	two := []fleetstore.Limit{testLimit, fleetstore.MustLimit(fleetstore.NewByteLimit(fleetstore.Bytes, 1, 1))}
	if _, err := st.Peek(ctx, "acme", two...); err != nil {
		t.Fatal(err)
	}
	if e := r.one(t, "peek"); e.Op != observe.OpPeek || e.Op.String() != "peek" || e.Charges != 2 || e.Class != observe.ClassNone || e.Local || e.Outcome != 0 {
		t.Errorf("peek: %+v", e)
	}
	if _, err := st.Peek(ctx, "", two...); !errors.Is(err, fleetstore.ErrInvalid) {
		t.Fatal(err)
	}
	if e := r.one(t, "invalid peek"); e.Op != observe.OpPeek || e.Class != observe.ClassInvalid {
		t.Errorf("invalid peek: %+v", e)
	}
	st.d.set(refused)
	if res, err := st.Peek(ctx, "acme", two...); err != nil || !res.Local {
		t.Fatalf("peek on a refused store: %+v %v", res, err)
	}
	if e := r.one(t, "local peek"); e.Op != observe.OpPeek || !e.Local || e.Class != observe.ClassNone {
		t.Errorf("local peek: %+v", e)
	}
}

// TestPeekShadow: a shadow limit's bucket is read as it stands, Shadow
// set and Denied when one unit would not fit, and never denies: the Peek
// answers as the Hit it foretells (CONTRACT §1.2, G11).
func TestPeekShadow(t *testing.T) {
	t.Parallel()
	clock := newStepClock()
	st, err := fleetstore.OpenDriver(memory.New(clock.now), "memory://peek-shadow")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	hooks := fleetstore.MustLimit(fleetstore.PerSecond(fleetstore.Hooks, 1, 5))
	next := fleetstore.MustLimit(fleetstore.PerSecond("hooks_next", 1, 2)).Shadow()
	for range 3 {
		if res, err := st.Hit(ctx, []fleetstore.Charge{hooks.Charge("acme", 1), next.Charge("acme", 1)}, nil); err != nil || res.Outcome != fleetstore.OK {
			t.Fatalf("hit: %+v %v", res, err)
		}
	}
	res, err := st.Peek(ctx, "acme", hooks, next)
	if err != nil {
		t.Fatal(err)
	}
	q := res.Quota()
	if res.Outcome != fleetstore.OK || res.RetryAfter != 0 || len(q) != 2 || q[0].Shadow || q[0].Denied || hooks.Remaining(q[0]) != 2 ||
		!q[1].Shadow || !q[1].Denied || q[1].ResetAfter != 3*time.Second || next.Remaining(q[1]) != 0 {
		t.Errorf("peek with a shadow limit past its burst: %+v, want OK, hooks 2 left, hooks_next shadow and denied", res)
	}
	hit, err := st.Hit(ctx, []fleetstore.Charge{hooks.Charge("acme", 1), next.Charge("acme", 1)}, nil)
	if err != nil || hit.Outcome != res.Outcome || hit.Quota()[1].Shadow != true || hit.Quota()[1].Denied != true {
		t.Errorf("the hit the peek foretold: %+v %v", hit, err)
	}
}
