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
// pool holds 16 connections (pool_size=16 for Redis, max_conns=16 for
// memcached; valkey has no pool: one auto-pipelined connection). Every 2ms
// it counts the connections two ways: the sockets this process holds open
// (exact, at once: see openSockets), and the server's own count (INFO
// clients connected_clients for Redis and Valkey, stats curr_connections
// for memcached), which also counts a socket the client closed until the
// server reads its EOF:
//
//   - every call returns a result or ErrTimeout (T1: the budget ran out)
//     within budget + 10ms + crowdSlack, and some calls succeed;
//   - the driver's sockets: during the bursts at most target.busyConns
//     (the pool size), after them at most target.idleConns, none after
//     Close;
//   - the server's count is back to its value before Open within 2s of
//     Close.
func TestBurst(t *testing.T) {
	const (
		budget  = 100 * time.Millisecond
		callers = 512
		pool    = 16
		rounds  = 3
	)
	forEach(t, func(t *testing.T, tg target) {
		srv := tg.start(t)
		base := counts(t, srv) // the counting connection itself
		params := ""
		if tg.poolParam != "" {
			params = tg.poolParam + "=" + strconv.Itoa(pool)
		}
		s := openStore(t, tg, srv.Addr(), budget, params)
		waitReady(t, s)

		stopSampling := sample(t, srv)
		pr := startProbe()
		var recs []record
		for range rounds {
			recs = append(recs, burst(s, callers)...)
		}
		slack := pr.slack(crowdSlack)
		peak, samples := stopSampling()
		busy := peak.minus(base)
		idle := counts(t, srv).minus(base)

		sum := checkCalls(t, recs, budget, slack, true)
		ok := len(recs) - failed(recs)
		if ok == 0 {
			t.Errorf("no call of %d succeeded", len(recs))
		}
		if busy.client < 1 {
			t.Fatalf("no socket of the driver seen during the bursts in %d samples: the count is broken, and the bounds below would pass on it", samples)
		}
		if want := tg.busyConns(callers, pool); busy.client > want {
			t.Errorf("the driver held %d sockets during the bursts; want at most %d", busy.client, want)
		}
		if want := tg.idleConns(pool); idle.client > want {
			t.Errorf("the driver held %d sockets after the bursts; want at most %d", idle.client, want)
		}
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		closedAt := time.Now()
		left := counts(t, srv).minus(base)
		for (left.client > 0 || left.server > 0) && time.Since(closedAt) < 2*time.Second {
			time.Sleep(10 * time.Millisecond)
			left = counts(t, srv).minus(base)
		}
		if left.client > 0 || left.server > 0 {
			t.Errorf("2s after Close the driver holds %d sockets and the server counts %d more connections than before Open; want 0 and 0", left.client, left.server)
		}
		outcomes := map[fleetstore.Outcome]int{}
		for _, r := range recs {
			if r.err == nil {
				outcomes[r.outcome]++
			}
		}
		poolDesc := "none"
		if tg.poolParam != "" {
			poolDesc = tg.poolParam + "=" + strconv.Itoa(pool)
		}
		t.Logf("FIGURE burst driver=%s budget=%v callers=%d rounds=%d pool=%s calls=%d ok=%d (OK %d) failed=%d (timeout %d, unavailable %d) worst=%v slack=%v probe=%v sockets_busy=%d sockets_idle=%d server_busy=%d server_idle=%d after_close=%d/%d samples=%d",
			tg.name, budget, callers, rounds, poolDesc,
			len(recs), ok, outcomes[fleetstore.OK], failed(recs), sum.timeouts, sum.unavailable, sum.worst.Round(100*time.Microsecond), slack.Round(time.Millisecond), pr.worst.Round(time.Millisecond),
			busy.client, idle.client, busy.server, idle.server, max(left.client, 0), max(left.server, 0), samples)
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

// connCount is a count of the connections to one server: the sockets this
// process holds open, and the server's own count.
type connCount struct{ client, server int }

func (c connCount) minus(d connCount) connCount {
	return connCount{c.client - d.client, c.server - d.server}
}

func counts(t *testing.T, srv server) connCount {
	t.Helper()
	c, err := countNow(srv)
	if err != nil {
		t.Fatalf("count connections: %v", err)
	}
	return c
}

func countNow(srv server) (connCount, error) {
	server, err := srv.Conns()
	if err != nil {
		return connCount{}, err
	}
	client, err := openSockets()
	return connCount{client, server}, err
}

// sample counts connections every 2ms until stop, which returns the
// largest of each count seen and the number of samples.
func sample(t *testing.T, srv server) (stop func() (connCount, int)) {
	quit := make(chan struct{})
	done := make(chan struct{})
	var (
		most    connCount
		samples int
		failure error
	)
	go func() {
		defer close(done)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			c, err := countNow(srv)
			if err != nil {
				failure = err
				return
			}
			most.client, most.server = max(most.client, c.client), max(most.server, c.server)
			samples++
			select {
			case <-quit:
				return
			case <-tick.C:
			}
		}
	}()
	return func() (connCount, int) {
		close(quit)
		<-done
		if failure != nil {
			t.Fatalf("count connections: %v", failure)
		}
		return most, samples
	}
}
