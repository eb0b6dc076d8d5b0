package faults

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore"
)

// TestBurst releases 512 callers at once, three times, on a Store whose
// pool holds 16 connections (pool_size=16 for Redis, max_idle_conns=16 for
// memcached; valkey has no pool: one auto-pipelined connection), while the
// server's own count of client connections (INFO clients for Redis and
// Valkey, stats curr_connections for memcached) is sampled every 2ms:
//
//   - every call returns a result or ErrTimeout (T1: the budget ran out)
//     within budget + 10ms + crowdSlack, and some calls succeed;
//   - during the bursts the driver holds at most target.busyConns
//     connections (the pool size; memcached: one per call in flight, it
//     has no cap), after them at most target.idleConns, and none within
//     2s of Close.
func TestBurst(t *testing.T) {
	const (
		budget  = 100 * time.Millisecond
		callers = 512
		pool    = 16
		rounds  = 3
	)
	forEach(t, func(t *testing.T, tg target) {
		srv := tg.start(t)
		base, err := srv.Conns() // the counting connection itself
		if err != nil {
			t.Fatalf("count connections: %v", err)
		}
		params := ""
		if tg.poolParam != "" {
			params = tg.poolParam + "=" + strconv.Itoa(pool)
		}
		s := openStore(t, tg, srv.Addr(), budget, params)
		waitReady(t, s)

		stopSampling, samples := sample(t, srv)
		pr := startProbe()
		var recs []record
		for range rounds {
			recs = append(recs, burst(s, callers)...)
		}
		slack := pr.slack(crowdSlack)
		busy := stopSampling() - base
		idle, err := srv.Conns()
		if err != nil {
			t.Fatalf("count connections: %v", err)
		}
		idle -= base

		sum := checkCalls(t, tg.name, recs, budget, slack, true)
		ok := len(recs) - failed(recs)
		if ok == 0 {
			t.Errorf("no call of %d succeeded", len(recs))
		}
		if want := tg.busyConns(callers, pool); busy > want {
			t.Errorf("%d connections during the bursts; want at most %d", busy, want)
		}
		if want := tg.idleConns(pool); idle > want {
			t.Errorf("%d connections after the bursts; want at most %d", idle, want)
		}
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		closedAt := time.Now()
		left := idle
		for left > 0 && time.Since(closedAt) < 2*time.Second {
			time.Sleep(10 * time.Millisecond)
			n, err := srv.Conns()
			if err != nil {
				t.Fatalf("count connections: %v", err)
			}
			left = n - base
		}
		if left > 0 {
			t.Errorf("%d connections 2s after Close; want 0", left)
		}
		outcomes := map[fleetstore.Outcome]int{}
		for _, r := range recs {
			if r.err == nil {
				outcomes[r.outcome]++
			}
		}
		t.Logf("FIGURE burst driver=%s budget=%v callers=%d rounds=%d pool=%s calls=%d ok=%d (OK %d) failed=%d (timeout %d, unavailable %d) worst=%v slack=%v probe=%v conns_busy=%d conns_idle=%d conns_after_close=%d samples=%d",
			tg.name, budget, callers, rounds, map[bool]string{true: tg.poolParam + "=" + strconv.Itoa(pool), false: "none"}[tg.poolParam != ""],
			len(recs), ok, outcomes[fleetstore.OK], failed(recs), sum.timeouts, sum.unavailable, sum.worst.Round(100*time.Microsecond), slack.Round(time.Millisecond), pr.worst.Round(time.Millisecond),
			busy, idle, max(left, 0), *samples)
		skipIfKnown(t, sum)
	})
}

// burst starts callers goroutines that each make one Hit, as close
// together as a barrier gets them, and returns their records.
func burst(s *fleetstore.Store, callers int) []record {
	recs := make([]record, callers)
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	for i := range callers {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			h := newHooks(randomName("burst-"), i) // a tenant each: the pool is under test, not one bucket
			charges, claim := h.next()
			ready.Done()
			<-start
			t0 := time.Now()
			res, err := s.Hit(context.Background(), charges, &claim)
			recs[i] = record{op: "hit", start: t0, took: time.Since(t0), outcome: res.Outcome, err: err}
		}()
	}
	ready.Wait()
	close(start)
	done.Wait()
	return recs
}

// sample counts the server's client connections every 2ms until stop,
// which returns the largest count seen; *n is the number of samples.
func sample(t *testing.T, srv server) (stop func() int, n *int) {
	quit := make(chan struct{})
	done := make(chan struct{})
	most, samples := 0, 0
	var sampleErr error
	go func() {
		defer close(done)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			c, err := srv.Conns()
			if err != nil {
				sampleErr = err
				return
			}
			most = max(most, c)
			samples++
			select {
			case <-quit:
				return
			case <-tick.C:
			}
		}
	}()
	return func() int {
		close(quit)
		<-done
		if sampleErr != nil {
			t.Fatalf("count connections: %v", sampleErr)
		}
		return most
	}, &samples
}
