package redis

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/conformance"
	"github.com/fleetstore/fleetstore/internal/testing/testserver"
)

// Hits through go-redis's auto-pipeliner (pipeline=auto, the default:
// while another Hit is in flight; pipeline=always: every Hit):
// concurrent Hits share connections, a lost batch reply re-sends none of
// its scripts (T5), and a Hit whose caller gave up while queued behind a
// slow batch is not sent (T1). TestConformancePipelined runs the whole
// suite with pipeline=always.

// connsFor runs conc callers of hits Hits each on a fresh store of raw and
// returns how many connections the server accepted meanwhile.
func connsFor(t *testing.T, srv *testserver.Redis, raw string, conc, hits int) int {
	t.Helper()
	st, _ := openStore(t, raw)
	tenant := "t-" + randHex(4)
	c := fleetstore.Charge{Kind: fleetstore.Hooks, Tenant: tenant, Increment: time.Microsecond, Capacity: time.Hour}
	mustHit(t, st, []fleetstore.Charge{c}, nil, fleetstore.OK) // connect, load the script
	before := connectionsReceived(t, srv)
	var wg sync.WaitGroup
	for range conc {
		wg.Go(func() {
			for range hits {
				if _, err := st.Hit(ctx(t), []fleetstore.Charge{c}, nil); err != nil {
					t.Errorf("hit: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	return connectionsReceived(t, srv) - before
}

func connectionsReceived(t *testing.T, srv *testserver.Redis) int {
	t.Helper()
	info, err := srv.Info("stats")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "total_connections_received:"); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("INFO stats has no total_connections_received")
	return 0
}

// TestHitsPipelined: 64 concurrent callers share the auto-pipeliner's
// connections (go-redis's pipeline pool, 10 at most), where pipeline=off
// opens about one per caller. Fails if Hits do not go through the
// auto-pipeliner.
func TestHitsPipelined(t *testing.T) {
	t.Parallel()
	srv := testserver.StartRedis(t)
	const conc, hits = 64, 30
	auto := connsFor(t, srv, withQuery(srv.URL(), "pool_size=64"), conc, hits)
	off := connsFor(t, srv, withQuery(srv.URL(), "pool_size=64&pipeline=off"), conc, hits)
	t.Logf("FIGURE pipeline: %d callers × %d Hits: %d new connections with pipeline=auto, %d with pipeline=off", conc, hits, auto, off)
	if auto > 10 {
		t.Errorf("pipeline=auto: %d new connections for %d concurrent callers, want at most go-redis's pipeline pool (10)", auto, conc)
	}
	if off <= auto {
		t.Errorf("pipeline=off opened %d connections, pipeline=auto %d: the control shows no pipelining", off, auto)
	}
}

// TestNoRetryOfLostBatch: concurrent Hits on one bucket whose batch reply
// is lost after the scripts ran fail, and none is re-sent by the
// auto-pipeliner (T5): the bucket is charged exactly once per Hit.
// Fails if the pipeliner's batch retries were on (go-redis retries a
// failed pipeline as a whole up to MaxRetries).
func TestNoRetryOfLostBatch(t *testing.T) {
	t.Parallel()
	srv := testserver.StartRedis(t)
	l := &lossy{batch: 2}
	scheme := dialerScheme("redis", l.dial)
	_, rest, _ := cutScheme(srv.URL())
	st, _ := openStore(t, withQuery(scheme+"://"+rest, "pipeline=always"))
	const conc, burst = 16, 40
	c := fleetstore.Charge{Kind: fleetstore.Hooks, Tenant: "t-" + randHex(4), Increment: time.Hour, Capacity: burst * time.Hour}
	mustHit(t, st, []fleetstore.Charge{c}, nil, fleetstore.OK) // connect, load the library
	waitLibrary(t, srv)
	l.armed.Store(1)
	var wg sync.WaitGroup
	var mu sync.Mutex
	failed := 0
	for range conc {
		wg.Go(func() {
			_, err := st.Hit(ctx(t), []fleetstore.Charge{c}, nil)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed++
				if !errors.Is(err, fleetstore.ErrUnavailable) {
					t.Errorf("lost batch: got error %v, want ErrUnavailable", err)
				}
			}
		})
	}
	wg.Wait()
	if l.lost.Load() != 1 || failed < 2 {
		t.Fatalf("lost %d batch replies, %d Hits failed: want 1 and at least 2 (one batch)", l.lost.Load(), failed)
	}
	// Every Hit reached the server once: 1 + conc charges taken.
	left := conforming(t, st, []fleetstore.Charge{c}, burst)
	if want := burst - 1 - conc; left != want {
		t.Fatalf("%d Hits conformed after the lost batch (%d of %d failed), want %d: %d scripts ran twice", left, failed, conc, want, want-left)
	}
	t.Logf("FIGURE pipeline: a lost batch reply failed %d of %d concurrent Hits, none re-sent", failed, conc)
}

// freeze stops srv (SIGSTOP) and returns the func that lets it run
// again; a test that ends before calling it leaves srv running all the same.
func freeze(t *testing.T, srv *testserver.Redis) (thaw func()) {
	t.Helper()
	if err := srv.Freeze(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	thaw = func() {
		once.Do(func() {
			if err := srv.Thaw(); err != nil {
				t.Error(err)
			}
		})
	}
	t.Cleanup(thaw)
	return thaw
}

// TestLeftBehindNotSent: a Hit queued behind a batch the server has not
// answered, whose caller's deadline runs out meanwhile, returns
// ErrTimeout on time and is never sent: when the server answers again,
// only the first Hit was charged. Fails without the leftBehind hook (the
// auto-pipeliner writes a queued command whatever its caller's context).
func TestLeftBehindNotSent(t *testing.T) {
	t.Parallel()
	srv := testserver.StartRedis(t)
	st, _ := openStore(t, withQuery(srv.URL(), "pipeline=always")) // budget 5s
	c := fleetstore.Charge{Kind: fleetstore.Hooks, Tenant: "t-" + randHex(4), Increment: time.Hour, Capacity: 3 * time.Hour}
	mustHit(t, st, []fleetstore.Charge{c}, nil, fleetstore.OK) // connect, load; 2 left
	thaw := freeze(t, srv)
	first := make(chan error, 1)
	go func() {
		_, err := st.Hit(ctx(t), []fleetstore.Charge{c}, nil)
		first <- err
	}()
	time.Sleep(300 * time.Millisecond) // its batch is written, unanswered
	short, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := st.Hit(short, []fleetstore.Charge{c}, nil)
	took := time.Since(start)
	wantErrIs(t, "hit queued behind an unanswered batch", err, fleetstore.ErrTimeout)
	if took > time.Second {
		t.Errorf("queued hit took %v with a 200ms deadline", took)
	}
	thaw()
	if err := <-first; err != nil {
		t.Fatalf("first hit: %v", err)
	}
	// The queued Hit's batch is flushed after the first one's reply:
	// give it time to have run, were it sent.
	time.Sleep(200 * time.Millisecond)
	if left := conforming(t, st, []fleetstore.Charge{c}, 3); left != 1 {
		t.Fatalf("%d Hits conformed after, want 1: the Hit whose caller had left was sent", left)
	}
}

// TestLeftBehindSparesBatchmates: a Hit whose caller left while queued
// does not fail the live Hits queued with it. go-redis writes a batch over
// 128 KiB in chunks and fails every later chunk unsent when a command of
// a chunk ends in an error other than a Redis reply; a tenant of 1 KiB
// (3 KiB encoded, in each of a Hit's keys) puts the 100 Hits queued behind
// a frozen server in several chunks, the one whose caller left in the
// first. Failed (61 of 100 live Hits with ErrTimeout, well inside their 5s
// budget) when leftBehind marked a dropped command with the bare context
// error.
func TestLeftBehindSparesBatchmates(t *testing.T) {
	t.Parallel()
	srv := testserver.StartRedis(t)
	st, _ := openStore(t, withQuery(srv.URL(), "pipeline=always")) // budget 5s
	c := []fleetstore.Charge{{Kind: fleetstore.Hooks, Tenant: strings.Repeat("%", 1024), Increment: time.Microsecond, Capacity: time.Hour}}
	mustHit(t, st, c, nil, fleetstore.OK) // connect, load the script
	thaw := freeze(t, srv)
	go st.Hit(context.Background(), c, nil) // its batch is written, unanswered
	time.Sleep(300 * time.Millisecond)
	short, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	go st.Hit(short, c, nil) // queued; its caller leaves
	time.Sleep(100 * time.Millisecond)
	const n = 100
	var failed atomic.Int32
	var sample atomic.Value
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			if _, err := st.Hit(context.Background(), c, nil); err != nil {
				failed.Add(1)
				sample.Store(err)
			}
		})
	}
	time.Sleep(time.Second) // the short caller has left; the rest wait
	thaw()
	wg.Wait()
	if f := failed.Load(); f > 0 {
		t.Errorf("%d of %d live Hits (5s budget) failed after the server answered again, e.g. %v: a caller that left failed its batchmates", f, n, sample.Load())
	}
}

// TestConformancePipelined runs the whole conformance suite with every
// Hit through the auto-pipeliner (pipeline=always), on one redis-server
// on a Redis Cluster and on a Sentinel-managed master: the clauses hold
// on that path too (the default, pipeline=auto, takes it only under
// concurrency).
func TestConformancePipelined(t *testing.T) {
	t.Parallel()
	t.Run("server", func(t *testing.T) {
		t.Parallel()
		conformance.Run(t, serverSuite(t, testserver.StartRedis(t), "pipeline=always"))
	})
	t.Run("cluster", func(t *testing.T) {
		t.Parallel()
		conformance.Run(t, clusterSuite(t, testserver.StartCluster(t), "pipeline=always"))
	})
	t.Run("sentinel", func(t *testing.T) {
		t.Parallel()
		conformance.Run(t, sentinelSuite(t, testserver.StartSentinel(t), "pipeline=always"))
	})
}

// TestPipelineRecoversAfterFreeze: 8 callers Hit through the
// auto-pipeliner while the server is stopped (SIGSTOP) for a second: their
// calls fail within the budget, and once it runs again (SIGCONT) every
// caller's Hits succeed within 2s, on the same Store.
func TestPipelineRecoversAfterFreeze(t *testing.T) {
	t.Parallel()
	srv := testserver.StartRedis(t)
	// Wide enough that no call 2s after the thaw outlasts it on a busy
	// machine; a stuck pipeline fails every call whatever the budget.
	const budget = 500 * time.Millisecond
	st, _ := openStore(t, withQuery(srv.URL(), "pipeline=always"), fleetstore.WithTimeout(budget))
	c := fleetstore.Charge{Kind: fleetstore.Hooks, Tenant: "t-" + randHex(4), Increment: time.Microsecond, Capacity: time.Hour}
	// Warm-up: the connection and the script loaded, however long a busy
	// machine takes to dial and load it within the budget.
	for warm := time.Now(); ; {
		res, err := st.Hit(ctx(t), []fleetstore.Charge{c}, nil)
		if err == nil && res.Outcome == fleetstore.OK {
			break
		}
		if time.Since(warm) > 5*time.Second {
			t.Fatalf("warm-up hit: %v %v", res, err)
		}
	}
	var thawedAt atomic.Int64 // unix ns; 0 while frozen or before
	stop := make(chan struct{})
	type last struct {
		okAfter time.Duration // first success after the thaw
		err     error         // the last error after the thaw + 2s
	}
	results := make([]last, 8)
	var wg sync.WaitGroup
	for i := range results {
		wg.Go(func() {
			r := &results[i]
			r.okAfter = -1
			for {
				select {
				case <-stop:
					return
				default:
				}
				_, err := st.Hit(context.Background(), []fleetstore.Charge{c}, nil)
				th := thawedAt.Load()
				if th == 0 {
					continue
				}
				since := time.Since(time.Unix(0, th))
				if err == nil && r.okAfter < 0 {
					r.okAfter = since
				}
				if err != nil && since > 2*time.Second {
					r.err = err
				}
				time.Sleep(time.Millisecond)
			}
		})
	}
	time.Sleep(200 * time.Millisecond)
	if err := srv.Freeze(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if err := srv.Thaw(); err != nil {
		t.Fatal(err)
	}
	thawedAt.Store(time.Now().UnixNano())
	time.Sleep(3 * time.Second)
	close(stop)
	wg.Wait()
	for i, r := range results {
		if r.okAfter < 0 || r.okAfter > 2*time.Second || r.err != nil {
			t.Errorf("caller %d: first Hit answered %v after the thaw (-1: none), an error after 2s: %v", i, r.okAfter, r.err)
		}
	}
}
