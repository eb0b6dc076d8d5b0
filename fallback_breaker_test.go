package fleetstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/driver"
)

// TestFallbackDecidesLocallyOnOutage: a Hit the shared store fails with
// ErrTimeout or ErrUnavailable (refused, silent, an error reply, a
// malformed result) is decided locally, Result.Local set; the call that
// met the outage returns within its budget, and the next ones without
// touching the shared store.
func TestFallbackDecidesLocallyOnOutage(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		mode int32
	}{{"refused", refused}, {"silent", silent}, {"error reply", replying}} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			st := openFlaky(t, fleetstore.Fallback{})
			st.d.set(tt.mode)
			claim := hookClaim("d-1", "h-1")
			t0 := time.Now()
			res, err := st.Hit(context.Background(), []fleetstore.Charge{bigCharge}, &claim)
			if took := time.Since(t0); err != nil || res.Outcome != fleetstore.OK || !res.Local {
				t.Fatalf("hit on a %s store: %+v %v (took %v), want OK, Local", tt.name, res, err, took)
			} else if took > 200*time.Millisecond+schedSlack {
				t.Errorf("the first hit took %v, more than its 200ms budget", took)
			}
			hits := st.d.hits.Load()
			if hits != 1 {
				t.Errorf("the first hit reached the shared store %d times, want once (no retry)", hits)
			}
			for i := range 100 {
				c := hookClaim(fmt.Sprintf("k-%d", i), "h-1")
				if res, err := st.Hit(context.Background(), []fleetstore.Charge{bigCharge}, &c); err != nil || !res.Local {
					t.Fatalf("hit %d: %+v %v, want a local decision", i, res, err)
				}
			}
			if n := st.d.hits.Load() - hits; n != 0 {
				t.Errorf("%d of 100 hits after the outage reached the shared store; want none (the breaker is open)", n)
			}
			if s := st.FallbackStats(); !s.Degraded || s.LocalDecisions != 101 || s.Outages != 1 {
				t.Errorf("stats %+v, want degraded, 101 local decisions, 1 outage", s)
			}
			// A retry of a hook by another hook is Pending locally; the
			// hook's own retry is OK (C2, C3 on the local store).
			other := hookClaim("d-1", "h-2")
			if res, _ := st.Hit(context.Background(), []fleetstore.Charge{bigCharge}, &other); res.Outcome != fleetstore.Pending || !res.Local {
				t.Errorf("another hook on a locally pending key: %+v, want Pending, Local", res)
			}
		})
	}
	t.Run("malformed result", func(t *testing.T) {
		t.Parallel()
		conn := &fakeConn{hit: func(context.Context, []driver.Charge, *driver.Claim) (driver.Result, error) {
			return driver.Result{Outcome: 99}, nil
		}}
		st := openFake(t, conn, fleetstore.WithFallback(fleetstore.Fallback{Nodes: 2}))
		res, err := st.Hit(context.Background(), []fleetstore.Charge{testCharge}, nil)
		if err != nil || !res.Local || res.Outcome != fleetstore.OK {
			t.Errorf("hit on a store answering nonsense: %+v %v, want a local OK", res, err)
		}
	})
}

// schedSlack is what a loaded 2-core machine under -race, another
// package's tests beside it, may add to a call that keeps its budget.
const schedSlack = 250 * time.Millisecond

// TestFallbackNotOnOtherErrors: ErrInvalid, ErrOverCapacity, outcomes a
// driver returns (ErrClaimLost, ErrInvalid), the caller's cancellation,
// a deadline already passed and ErrClosed are returned as they are, with
// no local decision and the breaker left closed (CONTRACT §8).
func TestFallbackNotOnOtherErrors(t *testing.T) {
	t.Parallel()
	fb := fleetstore.WithFallback(fleetstore.Fallback{Nodes: 2})
	check := func(t *testing.T, st *fleetstore.Store, err error, want error) {
		t.Helper()
		if !errors.Is(err, want) {
			t.Errorf("got %v, want %v", err, want)
		}
		if s := st.FallbackStats(); s.Degraded || s.LocalDecisions != 0 || s.Outages != 0 {
			t.Errorf("stats %+v: a %v opened the breaker or was decided locally", s, want)
		}
	}
	t.Run("invalid and over capacity", func(t *testing.T) {
		st := openFlaky(t, fleetstore.Fallback{})
		st.d.set(refused) // a driver call would trip it: there must be none
		bad := hookClaim("", "h-1")
		_, err := st.Hit(context.Background(), nil, &bad)
		check(t, st.Store, err, fleetstore.ErrInvalid)
		over := fleetstore.Charge{Kind: fleetstore.Hooks, Tenant: "acme", Increment: time.Second, Capacity: time.Millisecond}
		_, err = st.Hit(context.Background(), []fleetstore.Charge{over}, nil)
		check(t, st.Store, err, fleetstore.ErrOverCapacity)
		noTTL := hookClaim("k", "h-1")
		noTTL.TTL = 0
		check(t, st.Store, st.Commit(context.Background(), noTTL), fleetstore.ErrInvalid)
		if n := st.d.hits.Load() + st.d.commits.Load(); n != 0 {
			t.Errorf("%d driver calls for invalid input", n)
		}
	})
	for _, out := range []error{&driver.ClaimLostError{Holder: "h-9"}, driver.Invalid("claim.key", "bad"), driver.ErrAlreadyCommitted} {
		t.Run(fmt.Sprintf("driver outcome %v", out), func(t *testing.T) {
			conn := &fakeConn{
				hit: func(context.Context, []driver.Charge, *driver.Claim) (driver.Result, error) {
					return driver.Result{}, out
				},
				commit: func(_ context.Context, cs []driver.Claim) ([]error, error) {
					errs := make([]error, len(cs))
					for i := range errs {
						errs[i] = out
					}
					return errs, nil
				},
			}
			st := openFake(t, conn, fb)
			_, err := st.Hit(context.Background(), []fleetstore.Charge{testCharge}, nil)
			check(t, st, err, out)
			check(t, st, st.Commit(context.Background(), testClaim), out)
			if s := st.FallbackStats(); s.Queued != 0 {
				t.Errorf("a commit the store answered %v was queued", out)
			}
		})
	}
	t.Run("caller cancels", func(t *testing.T) {
		started := make(chan struct{}, 1)
		conn := &fakeConn{hit: func(ctx context.Context, _ []driver.Charge, _ *driver.Claim) (driver.Result, error) {
			started <- struct{}{}
			<-ctx.Done()
			return driver.Result{}, fmt.Errorf("read: %w", ctx.Err())
		}}
		st := openFake(t, conn, fb, fleetstore.WithTimeout(time.Minute))
		ctx, cancel := context.WithCancel(context.Background())
		go func() { <-started; cancel() }()
		_, err := st.Hit(ctx, []fleetstore.Charge{testCharge}, nil)
		check(t, st, err, context.Canceled)
	})
	t.Run("deadline already passed", func(t *testing.T) {
		st := openFlaky(t, fleetstore.Fallback{})
		ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
		defer cancel()
		_, err := st.Hit(ctx, []fleetstore.Charge{bigCharge}, nil)
		check(t, st.Store, err, fleetstore.ErrTimeout)
		if n := st.d.hits.Load(); n != 0 {
			t.Errorf("%d driver calls with a passed deadline", n)
		}
	})
	t.Run("closed", func(t *testing.T) {
		st := openFlaky(t, fleetstore.Fallback{})
		st.Close()
		_, err := st.Hit(context.Background(), []fleetstore.Charge{bigCharge}, nil)
		check(t, st.Store, err, fleetstore.ErrClosed)
	})
	t.Run("degraded: a passed deadline is still an error", func(t *testing.T) {
		st := openFlaky(t, fleetstore.Fallback{})
		st.d.set(refused)
		if res, err := st.Hit(context.Background(), []fleetstore.Charge{bigCharge}, nil); err != nil || !res.Local {
			t.Fatalf("hit: %+v %v", res, err)
		}
		ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
		defer cancel()
		if _, err := st.Hit(ctx, []fleetstore.Charge{bigCharge}, nil); !errors.Is(err, fleetstore.ErrTimeout) {
			t.Errorf("degraded hit with a passed deadline: %v, want ErrTimeout (T1)", err)
		}
	})
	t.Run("a driver may not mark a result local", func(t *testing.T) {
		conn := &fakeConn{hit: func(context.Context, []driver.Charge, *driver.Claim) (driver.Result, error) {
			return driver.Result{Outcome: driver.OK, Local: true}, nil
		}}
		st := openFake(t, conn)
		if _, err := st.Hit(context.Background(), []fleetstore.Charge{testCharge}, nil); !errors.Is(err, fleetstore.ErrUnavailable) {
			t.Errorf("a driver's Result with Local set: %v, want ErrUnavailable", err)
		}
	})
}

// TestFallbackProbe: the breaker's probe. No call waits for it (a probe
// held for seconds stops no Hit); one probe runs at a time however many
// calls meet the outage; its waits back off (a few probes a second, not
// one per call); and once the store answers, calls go shared again within
// the probe's longest wait (1s) plus its budget.
func TestFallbackProbe(t *testing.T) {
	t.Parallel()
	t.Run("no call waits for it, one at a time", func(t *testing.T) {
		t.Parallel()
		st := openFlaky(t, fleetstore.Fallback{}, fleetstore.WithTimeout(5*time.Second))
		gate := make(chan struct{})
		st.d.pingGate.Store(&gate)
		st.d.set(refused)
		var wg sync.WaitGroup
		for w := range 16 {
			wg.Go(func() {
				for i := range 50 {
					c := hookClaim(fmt.Sprintf("k-%d-%d", w, i), "h")
					if res, err := st.Hit(context.Background(), []fleetstore.Charge{bigCharge}, &c); err != nil || !res.Local {
						t.Errorf("hit: %+v %v", res, err)
						return
					}
				}
			})
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("hits did not return while the probe was held: a call waits for the probe")
		}
		if !waitFor(5*time.Second, func() bool { return st.d.pingsInFlight.Load() == 1 }) {
			t.Fatalf("no probe in flight")
		}
		if n := st.d.pings.Load(); n != 1 {
			t.Errorf("%d pings started while one was held, want 1", n)
		}
		close(gate)
		if m := st.d.maxPingsInFlight.Load(); m != 1 {
			t.Errorf("%d probes ran at once, want 1", m)
		}
	})
	t.Run("backoff and recovery", func(t *testing.T) {
		t.Parallel()
		st := openFlaky(t, fleetstore.Fallback{})
		st.d.set(refused)
		if res, _ := st.Hit(context.Background(), []fleetstore.Charge{bigCharge}, nil); !res.Local {
			t.Fatal("not degraded")
		}
		time.Sleep(3 * time.Second)
		// Waits of 25ms doubling to 1s, each drawn from [b/2, b]: 5–10
		// probes in 3s. One per millisecond would be thousands.
		if n := st.d.pings.Load(); n < 3 || n > 15 {
			t.Errorf("%d probes in 3s of outage, want a backoff from tens of ms to 1s (5–10)", n)
		}
		st.d.set(healthy)
		back := time.Now()
		if !waitFor(5*time.Second, func() bool {
			res, err := st.Hit(context.Background(), []fleetstore.Charge{bigCharge}, nil)
			return err == nil && !res.Local
		}) {
			t.Fatalf("calls never went shared again")
		}
		if took := time.Since(back); took > time.Second+200*time.Millisecond+schedSlack {
			t.Errorf("calls went shared %v after the store answered, want within the probe's 1s wait and its budget", took)
		}
		if s := st.FallbackStats(); s.Degraded {
			t.Errorf("stats %+v after recovery", s)
		}
	})
	t.Run("closed while degraded", func(t *testing.T) {
		t.Parallel()
		st := openFlaky(t, fleetstore.Fallback{})
		st.d.set(silent)
		_, _ = st.Hit(context.Background(), []fleetstore.Charge{bigCharge}, nil)
		t0 := time.Now()
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(t0); took > 200*time.Millisecond+schedSlack {
			t.Errorf("Close of a degraded Store took %v: the probe outlived it", took)
		}
		n := st.d.pings.Load()
		time.Sleep(300 * time.Millisecond)
		if m := st.d.pings.Load(); m != n {
			t.Errorf("%d probes after Close", m-n)
		}
	})
}

// TestFallbackLogsAndState: one warning when the Store goes degraded, one
// info line when it is back, none per call; OnStateChange is told both, in
// order, with the cause; a flapping store does not log per flap faster
// than the probe's backoff.
func TestFallbackLogsAndState(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var changes []fleetstore.StateChange
	st := openFlaky(t, fleetstore.Fallback{OnStateChange: func(c fleetstore.StateChange) {
		mu.Lock()
		changes = append(changes, c)
		mu.Unlock()
	}})
	ctx := context.Background()
	st.d.set(refused)
	for i := range 200 {
		c := hookClaim(fmt.Sprintf("k-%d", i), "h")
		if _, err := st.Hit(ctx, []fleetstore.Charge{bigCharge}, &c); err != nil {
			t.Fatal(err)
		}
		if err := st.Commit(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	if n := st.logs.Len(); n != 1 || logCount(st.logs, "shared store out") != 1 {
		t.Fatalf("%d log lines for 400 degraded calls, want the one 'shared store out': %v", n, st.logs.All())
	}
	e := st.logs.All()[0]
	if e.ContextMap()["scheme"] != "memory" || e.ContextMap()["error"] == nil {
		t.Errorf("degraded line fields %v, want scheme and error", e.ContextMap())
	}
	st.d.set(healthy)
	if !waitFor(5*time.Second, func() bool { return !st.FallbackStats().Degraded }) {
		t.Fatal("never recovered")
	}
	if n := logCount(st.logs, "shared store back"); n != 1 || st.logs.Len() != 2 {
		t.Fatalf("after recovery: %v, want one 'shared store back' line", st.logs.All())
	}
	back := st.logs.All()[1].ContextMap()
	if back["replayed"] != uint64(200) || back["local_decisions"] != uint64(200) {
		t.Errorf("back line fields %v, want replayed 200, local_decisions 200", back)
	}
	if !waitFor(5*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(changes) == 2 }) {
		t.Fatalf("state changes %+v, want degraded then back", changes)
	}
	mu.Lock()
	if !changes[0].Degraded || !errors.Is(changes[0].Cause, fleetstore.ErrUnavailable) || changes[1].Degraded || changes[1].Stats.Replayed != 200 {
		t.Errorf("state changes %+v, want degraded (cause ErrUnavailable) then back (200 replayed)", changes)
	}
	mu.Unlock()
}

// TestFallbackSwitchBackKeepsLocalPending: a hook admitted locally during
// an outage is still pending on this node when the store is back; the
// provider's retry (another hook for the same delivery) arriving here
// right after the switch back is Pending, not a second admission, and
// once the first hook commits (now in the shared store) the retry is a
// Duplicate.
func TestFallbackSwitchBackKeepsLocalPending(t *testing.T) {
	t.Parallel()
	st := openFlaky(t, fleetstore.Fallback{})
	ctx := context.Background()
	st.d.set(refused)
	a := hookClaim("switch-back", "hook-A")
	if res, err := st.Hit(ctx, []fleetstore.Charge{bigCharge}, &a); err != nil || res.Outcome != fleetstore.OK || !res.Local {
		t.Fatalf("hit during the outage: %+v %v, want a local OK", res, err)
	}
	st.d.set(healthy)
	recovered(t, st)
	b := hookClaim("switch-back", "hook-B")
	res, err := st.Hit(ctx, []fleetstore.Charge{bigCharge}, &b)
	if err != nil || res.Outcome != fleetstore.Pending || res.RetryAfter <= 0 {
		t.Fatalf("the retry at this node after the switch back: %+v %v, want Pending (hook-A holds it here)", res, err)
	}
	// It charged nothing and reports the local bucket as it stands, its
	// headroom at this node's share of 2 (G10, as a local Hit does).
	if q := res.Quota(); len(q) != 1 || q[0].Kind != bigCharge.Kind || q[0].Denied ||
		q[0].Headroom != (bigCharge.Capacity-q[0].ResetAfter)/time.Microsecond/2*time.Microsecond {
		t.Errorf("the retry's bucket states: %+v, want the local bucket, headroom (capacity − reset-after) / 2", q)
	}
	if err := st.Commit(ctx, a); err != nil {
		t.Fatalf("hook-A's commit after the switch back: %v", err)
	}
	if res, err := st.Hit(ctx, []fleetstore.Charge{bigCharge}, &b); err != nil || res.Outcome != fleetstore.Duplicate || res.HookID != "hook-A" {
		t.Fatalf("the retry after hook-A committed: %+v %v, want Duplicate of hook-A", res, err)
	}
	if s := st.FallbackStats(); s.Conflicts != 0 {
		t.Errorf("stats %+v: no conflict happened", s)
	}
}

// TestFallbackPingAndReset: while the breaker is open, Ping still asks
// the shared store (a refused store is ErrUnavailable, never the local
// store's nil), and Reset is ErrUnavailable but forgets the tenant's local
// buckets: a local bucket drained before it is full after it (CONTRACT
// §8, "The breaker").
func TestFallbackPingAndReset(t *testing.T) {
	t.Parallel()
	d := newFlaky()
	st := openOnFlaky(t, d, fmt.Sprintf("flaky-%d", flakySeq.Add(1)), fleetstore.Fallback{})
	d.set(refused)
	ctx := context.Background()
	// Burst 1: this node's share (1/2) takes one local charge, then denies.
	one := fleetstore.Charge{Kind: fleetstore.Hooks, Tenant: "reset-me", Increment: time.Hour,
		Capacity: time.Hour}
	for i, want := range []fleetstore.Outcome{fleetstore.OK, fleetstore.RateLimited} {
		if res, err := st.Hit(ctx, []fleetstore.Charge{one}, nil); err != nil || !res.Local ||
			res.Outcome != want {
			t.Fatalf("local hit %d: %+v %v, want local %v", i+1, res, err, want)
		}
	}
	if err := st.Ping(ctx); !errors.Is(err, fleetstore.ErrUnavailable) {
		t.Errorf("Ping while degraded, the store refusing: %v, want ErrUnavailable", err)
	}
	if err := st.Reset(ctx, "reset-me"); !errors.Is(err, fleetstore.ErrUnavailable) {
		t.Errorf("Reset while degraded: %v, want ErrUnavailable", err)
	}
	if res, err := st.Hit(ctx, []fleetstore.Charge{one}, nil); err != nil || !res.Local ||
		res.Outcome != fleetstore.OK {
		t.Errorf("local hit after Reset: %+v %v, want local OK (the local bucket forgotten)", res, err)
	}
}
