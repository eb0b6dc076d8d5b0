package fleetstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/observe"
)

// recorder keeps every Event it is told of, and what Attach gave it.
type recorder struct {
	mu       sync.Mutex
	events   []observe.Event
	info     *observe.StoreInfo
	detached int
	refuse   error // Attach's answer
}

func (r *recorder) Observe(_ context.Context, e observe.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *recorder) Attach(info observe.StoreInfo) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.refuse != nil {
		return r.refuse
	}
	r.info = &info
	return nil
}

func (r *recorder) Detach() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.detached++
}

// take returns the events so far and forgets them.
func (r *recorder) take() []observe.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.events
	r.events = nil
	return e
}

// one returns the one event told since the last take, failing otherwise.
func (r *recorder) one(t *testing.T, what string) observe.Event {
	t.Helper()
	es := r.take()
	if len(es) != 1 {
		t.Fatalf("%s: %d events %+v, want 1", what, len(es), es)
	}
	return es[0]
}

// TestObserverEvents: every call of a memory:// Store is told once, after
// it, with its op, outcome, denied kinds, error class, claim counts and a
// duration within the call's; the observer is attached at Open and
// detached at Close.
func TestObserverEvents(t *testing.T) {
	t.Parallel()
	r := &recorder{}
	st, err := fleetstore.Open("memory://observer-events", fleetstore.WithObserver(r))
	if err != nil {
		t.Fatal(err)
	}
	if r.info == nil || r.info.Scheme != "memory" || r.info.Fallback || r.info.Stats == nil || r.info.Stats() != (observe.Stats{}) {
		t.Fatalf("attach: %+v, want scheme memory, no fallback, zero Stats", r.info)
	}
	ctx := context.Background()
	hooks := fleetstore.Charge{Kind: fleetstore.Hooks, Tenant: "acme", Increment: time.Second, Capacity: time.Second}
	bytes := fleetstore.Charge{Kind: fleetstore.Bytes, Tenant: "acme", Increment: time.Microsecond, Capacity: time.Hour}
	c1 := hookClaim("evt-1", "hook-1")

	t0 := time.Now()
	if _, err := st.Hit(ctx, []fleetstore.Charge{hooks, bytes}, &c1); err != nil {
		t.Fatal(err)
	}
	took := time.Since(t0)
	e := r.one(t, "hit")
	if e.Op != observe.OpHit || e.Outcome != fleetstore.OK || e.Class != observe.ClassNone || e.Local || e.Charges != 2 || e.Claims != 1 || e.NDenied != 0 {
		t.Errorf("OK hit: %+v", e)
	}
	if e.Start.Before(t0) || e.Duration <= 0 || e.Duration > took {
		t.Errorf("OK hit: start %v duration %v, want within the call's [%v, +%v]", e.Start, e.Duration, t0, took)
	}

	// The hooks bucket is spent: the next Hit is denied by it alone.
	c2 := hookClaim("evt-2", "hook-2")
	if res, _ := st.Hit(ctx, []fleetstore.Charge{hooks, bytes}, &c2); res.Outcome != fleetstore.RateLimited {
		t.Fatalf("second hit: %v, want RateLimited", res.Outcome)
	}
	e = r.one(t, "rate-limited hit")
	if e.Outcome != fleetstore.RateLimited || e.NDenied != 1 || e.Denied[0] != fleetstore.Hooks || len(e.DeniedKinds()) != 1 {
		t.Errorf("rate-limited hit: %+v, want denied by hooks only", e)
	}

	// Another hook on the pending key, without charges: Pending.
	other := hookClaim("evt-1", "hook-9")
	if _, err := st.Hit(ctx, nil, &other); err != nil {
		t.Fatal(err)
	}
	if e = r.one(t, "pending hit"); e.Outcome != fleetstore.Pending || e.Charges != 0 || e.Claims != 1 {
		t.Errorf("pending hit: %+v", e)
	}

	if err := st.Commit(ctx, c1); err != nil {
		t.Fatal(err)
	}
	if e = r.one(t, "commit"); e.Op != observe.OpCommit || e.Claims != 1 || e.Failed != 0 || e.Class != observe.ClassNone {
		t.Errorf("commit: %+v", e)
	}
	if _, err := st.Hit(ctx, nil, &other); err != nil {
		t.Fatal(err)
	}
	if e = r.one(t, "duplicate hit"); e.Outcome != fleetstore.Duplicate {
		t.Errorf("duplicate hit: %+v", e)
	}

	// A batch of three: one committed by another hook (ClaimLost), one
	// committed by its own (ErrAlreadyCommitted on Release), one absent.
	lost, absent := hookClaim("evt-1", "hook-9"), hookClaim("evt-absent", "hook-3")
	err = st.Release(ctx, c1, lost, absent)
	if !errors.Is(err, fleetstore.ErrAlreadyCommitted) || !errors.Is(err, fleetstore.ErrClaimLost) {
		t.Fatalf("release: %v", err)
	}
	if e = r.one(t, "release"); e.Op != observe.OpRelease || e.Claims != 3 || e.Failed != 2 || e.Class != observe.ClassAlreadyCommitted {
		t.Errorf("release: %+v, want 3 claims, 2 failed, classed by the first (already_committed)", e)
	}

	if err := st.Reset(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	if e = r.one(t, "reset"); e.Op != observe.OpReset || e.Class != observe.ClassNone {
		t.Errorf("reset: %+v", e)
	}
	if err := st.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if e = r.one(t, "ping"); e.Op != observe.OpPing {
		t.Errorf("ping: %+v", e)
	}

	// Errors: invalid, over capacity, cancelled, then closed.
	if _, err := st.Hit(ctx, []fleetstore.Charge{{Kind: "Bad", Tenant: "acme", Increment: 1, Capacity: 1}}, nil); !errors.Is(err, fleetstore.ErrInvalid) {
		t.Fatalf("bad kind: %v", err)
	}
	if e = r.one(t, "invalid hit"); e.Class != observe.ClassInvalid || e.Outcome != 0 {
		t.Errorf("invalid hit: %+v", e)
	}
	over := fleetstore.Charge{Kind: fleetstore.Hooks, Tenant: "acme", Increment: time.Hour, Capacity: time.Second}
	if _, err := st.Hit(ctx, []fleetstore.Charge{over}, nil); !errors.Is(err, fleetstore.ErrOverCapacity) {
		t.Fatalf("over capacity: %v", err)
	}
	if e = r.one(t, "over-capacity hit"); e.Class != observe.ClassOverCapacity {
		t.Errorf("over-capacity hit: %+v", e)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := st.Commit(cctx, c2); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled commit: %v", err)
	}
	if e = r.one(t, "cancelled commit"); e.Class != observe.ClassCancelled || e.Failed != 1 {
		t.Errorf("cancelled commit: %+v", e)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if r.detached != 1 {
		t.Errorf("detached %d times at Close, want 1", r.detached)
	}
	if _, err := st.Hit(ctx, []fleetstore.Charge{bytes}, nil); !errors.Is(err, fleetstore.ErrClosed) {
		t.Fatalf("hit after close: %v", err)
	}
	if e = r.one(t, "closed hit"); e.Class != observe.ClassClosed {
		t.Errorf("closed hit: %+v", e)
	}
	st.Close()
	if r.detached != 1 {
		t.Errorf("detached %d times after a second Close, want 1", r.detached)
	}
}

// TestObserverAttachRefused: an observer that refuses its Store fails
// Open with ErrInvalid naming "observer".
func TestObserverAttachRefused(t *testing.T) {
	t.Parallel()
	r := &recorder{refuse: errors.New("already observes a Store")}
	st, err := fleetstore.Open("memory://observer-refused", fleetstore.WithObserver(r))
	var ie *fleetstore.InvalidError
	if st != nil || !errors.As(err, &ie) || ie.Field != "observer" || !strings.Contains(err.Error(), "already observes") {
		t.Fatalf("open: %v, want ErrInvalid naming observer", err)
	}
}

// TestObserverDegraded: with the shared store out, Hits are told as
// local decisions, a Commit as local (queued in the outbox), and the
// replay once the store is back as a replay batch; StoreInfo.Stats is
// the Store's.
func TestObserverDegraded(t *testing.T) {
	t.Parallel()
	r := &recorder{}
	st := openFlaky(t, fleetstore.Fallback{}, fleetstore.WithObserver(r))
	if r.info == nil || !r.info.Fallback || r.info.Scheme != "memory" {
		t.Fatalf("attach: %+v, want the fallback", r.info)
	}
	ctx := context.Background()
	st.d.set(refused)
	c := hookClaim("deg-1", "hook-1")
	res, err := st.Hit(ctx, []fleetstore.Charge{bigCharge}, &c)
	if err != nil || !res.Local {
		t.Fatalf("hit: %+v %v, want a local decision", res, err)
	}
	if e := r.one(t, "local hit"); e.Op != observe.OpHit || !e.Local || e.Outcome != fleetstore.OK || e.Class != observe.ClassNone {
		t.Errorf("local hit: %+v", e)
	}
	if err := st.Commit(ctx, c); err != nil {
		t.Fatal(err)
	}
	if e := r.one(t, "local commit"); e.Op != observe.OpCommit || !e.Local || e.Failed != 0 {
		t.Errorf("local commit: %+v", e)
	}
	if s := r.info.Stats(); !s.Degraded || s.Outbox != 1 {
		t.Errorf("StoreInfo.Stats: %+v, want degraded, 1 queued", s)
	}
	if err := st.Reset(ctx, "acme"); !errors.Is(err, fleetstore.ErrUnavailable) {
		t.Fatalf("reset while degraded: %v", err)
	}
	if e := r.one(t, "degraded reset"); e.Op != observe.OpReset || e.Class != observe.ClassUnavailable || e.Local {
		t.Errorf("degraded reset: %+v", e)
	}
	st.d.set(healthy)
	if !waitFor(10*time.Second, func() bool { return !st.FallbackStats().Degraded }) {
		t.Fatal("still degraded 10s after the store is back")
	}
	var replays []observe.Event
	for _, e := range r.take() {
		if e.Op == observe.OpReplay {
			replays = append(replays, e)
		}
	}
	if len(replays) == 0 || replays[len(replays)-1].Claims != 1 || replays[len(replays)-1].Failed != 0 || replays[len(replays)-1].Class != observe.ClassNone {
		t.Errorf("replays: %+v, want a last batch of 1 commit replayed", replays)
	}
}

// panicOnReplay is an observer that panics on every replay event.
type panicOnReplay struct{ replays atomic.Int64 }

func (p *panicOnReplay) Observe(_ context.Context, e observe.Event) {
	if e.Op == observe.OpReplay {
		p.replays.Add(1)
		panic("observer bug: s3cret")
	}
}

// TestObserverPanicOnReplay: an observer that panics on the probe
// goroutine's replay events does not end the process: the commits are
// replayed all the same, the event is dropped, and the Store logs it once
// (the panic value's type, never the value), over two outages.
func TestObserverPanicOnReplay(t *testing.T) {
	t.Parallel()
	p := &panicOnReplay{}
	st := openFlaky(t, fleetstore.Fallback{}, fleetstore.WithObserver(p))
	ctx := context.Background()
	for i := range 2 {
		st.d.set(refused)
		c := hookClaim("panic-"+string(rune('a'+i)), "hook-1")
		if _, err := st.Hit(ctx, []fleetstore.Charge{bigCharge}, &c); err != nil {
			t.Fatal(err)
		}
		if err := st.Commit(ctx, c); err != nil {
			t.Fatal(err)
		}
		st.d.set(healthy)
		if !waitFor(10*time.Second, func() bool { s := st.FallbackStats(); return !s.Degraded && s.Outbox == 0 }) {
			t.Fatalf("outage %d: not replayed 10s after the store is back: %+v", i, st.FallbackStats())
		}
	}
	if s := st.FallbackStats(); s.Replayed != 2 || p.replays.Load() < 2 {
		t.Fatalf("replayed %d commits, observer told %d times; want 2 and at least 2", s.Replayed, p.replays.Load())
	}
	logged := st.logs.FilterMessageSnippet("observer panicked").All()
	if len(logged) != 1 {
		t.Fatalf("logged the panic %d times, want once", len(logged))
	}
	if got := logged[0].ContextMap()["panic_type"]; got != "string" {
		t.Errorf("panic_type %v, want string", got)
	}
	if strings.Contains(fmt.Sprint(logged[0].ContextMap()), "s3cret") {
		t.Errorf("the log line holds the panic value: %v", logged[0].ContextMap())
	}
}

// panicOn panics with its own value when told of a call of op.
type panicOn struct{ op observe.Op }

func (p panicOn) Observe(_ context.Context, e observe.Event) {
	if e.Op == p.op {
		panic(p)
	}
}

// TestObserverPanicReachesCaller: an observer's panic on a caller's call
// is not recovered by the Store: it reaches the caller, with its value
// (CONTRACT §2), with and without the degraded mode.
func TestObserverPanicReachesCaller(t *testing.T) {
	t.Parallel()
	for _, fb := range []bool{false, true} {
		p := panicOn{op: observe.OpHit}
		opts := []fleetstore.Option{fleetstore.WithObserver(p)}
		if fb {
			opts = append(opts, fleetstore.WithFallback(fleetstore.Fallback{Nodes: 2}))
		}
		st, err := fleetstore.Open("memory://", opts...)
		if err != nil {
			t.Fatal(err)
		}
		func() {
			defer func() {
				if r := recover(); r != p {
					t.Errorf("fallback %v: recovered %v, want the observer's panic", fb, r)
				}
			}()
			_, _ = st.Hit(context.Background(), []fleetstore.Charge{bigCharge}, nil)
			t.Errorf("fallback %v: Hit returned past the observer's panic", fb)
		}()
		st.Close()
	}
}
