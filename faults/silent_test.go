package faults

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/fleetstore/fleetstore/nettest"
)

// TestSilentListener makes 10 000 calls, 64 at a time, with a 20ms budget
// against a listener that accepts connections and never answers, then
// closes the Store:
//
//   - every call fails with ErrTimeout within budget + 10ms + crowdSlack
//     (T1);
//   - within cleanWindow of Close, every socket the driver opened is
//     closed (the listener reads EOF on each) and the goroutines are those
//     that ran before the Store was opened (goleak).
func TestSilentListener(t *testing.T) {
	const (
		budget  = 20 * time.Millisecond
		calls   = 10000
		callers = 64
		// cleanWindow is how long after Close the goroutine count may take
		// to come back: valkey-go schedules a cluster-topology refresh,
		// after a random sleep of up to 1s, when a connection closes
		// (valkey-go cluster.go lazyRefresh), also during Close.
		cleanWindow = 2 * time.Second
	)
	forEach(t, func(t *testing.T, tg target) {
		settle(t, cleanWindow)
		before := runtime.NumGoroutine()
		ignore := goleak.IgnoreCurrent()
		ln := nettest.NewSilent(t)
		s := openStore(t, tg, ln.Addr(), budget, "")

		var (
			next  atomic.Int64
			mu    sync.Mutex
			recs  []record
			wg    sync.WaitGroup
			start = time.Now()
			pr    = startProbe()
		)
		for w := range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				h := newHooks(randomName("silent-"), w)
				var mine []record
				for next.Add(1) <= calls {
					charges, claim := h.next()
					t0 := time.Now()
					_, err := s.Hit(context.Background(), charges, &claim)
					mine = append(mine, record{op: "hit", start: t0, took: time.Since(t0), err: err})
				}
				mu.Lock()
				recs = append(recs, mine...)
				mu.Unlock()
			}()
		}
		wg.Wait()
		elapsed := time.Since(start)
		during := runtime.NumGoroutine()
		slack := pr.slack(crowdSlack)

		sum := checkCalls(t, recs, budget, slack, true)
		if n := failed(recs); n != calls {
			t.Errorf("%d of %d calls failed; want every one (nothing answers)", n, calls)
		}
		if ln.Accepted() == 0 {
			t.Errorf("the listener accepted no connection: the calls never reached it, and the socket check below would pass on none")
		}
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		closedAt := time.Now()
		open := ln.StillOpen(cleanWindow)
		socketsGone := time.Since(closedAt)
		if open > 0 {
			t.Errorf("%d sockets still open %v after Close; want 0", open, cleanWindow)
		}
		ln.Close()
		// The listener's goroutines are gone: what is left is the driver's.
		err := goleak.Find(ignore)
		for err != nil && time.Since(closedAt) < cleanWindow {
			err = goleak.Find(ignore) // itself retries for about 0.4s
		}
		goroutinesGone := time.Since(closedAt)
		if err != nil {
			t.Errorf("goroutines left %v after Close: %v", goroutinesGone.Round(time.Millisecond), err)
		}
		after := runtime.NumGoroutine()
		t.Logf("FIGURE silent driver=%s budget=%v calls=%d in %v failed=%d (timeout %d, unavailable %d) worst=%v slack=%v probe=%v accepted=%d goroutines before=%d during=%d after_close=%d back_in=%v sockets_closed_in=%v",
			tg.name, budget, len(recs), elapsed.Round(time.Millisecond), failed(recs), sum.timeouts, sum.unavailable, sum.worst.Round(100*time.Microsecond),
			slack.Round(time.Millisecond), pr.worst.Round(time.Millisecond), ln.Accepted(), before, during, after, goroutinesGone.Round(time.Millisecond), socketsGone.Round(time.Millisecond))
	})
}

// settle waits, for at most d, until no goroutine is left but the test
// runner's: an earlier test's Store may leave one behind for a while after
// its Close (see cleanWindow), which must not count against this one.
func settle(t *testing.T, d time.Duration) {
	deadline := time.Now().Add(d)
	err := goleak.Find()
	for err != nil && time.Now().Before(deadline) {
		err = goleak.Find()
	}
	if err != nil {
		t.Logf("goroutines of earlier tests still running (ignored): %v", err)
	}
}
