package degraded

import (
	"context"
	"fmt"
	"net/url"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/internal/checked"
	"github.com/fleetstore/fleetstore/internal/memstore"
)

// hourEdges are a window of 1h from start (µs), and the ones before and after.
func hourEdges(start int64) [4]int64 {
	const h = int64(time.Hour / time.Microsecond)
	return [4]int64{start - h, start, start + h, start + 2*h}
}

// quotaConn is newTestConn with share s and one injected clock for the
// shared and the local store.
func quotaConn(t *testing.T, s Share, now *atomic.Int64) (*Conn, driver.Conn) {
	t.Helper()
	clock := func() int64 { return now.Load() }
	shared, err := memstore.New(clock).Open(driver.Config{
		URL: &url.URL{Scheme: "memory", Host: "shared"}, KeyPrefix: "shared",
		Timeout: time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	fb, err := New(checked.New(shared), Rules{Share: s, OutboxSize: 16, LocalClaims: 64,
		RecentCommits: 16, Logger: zap.NewNop(), Timeout: time.Second, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fb.Close() })
	return fb, shared
}

func windowCharge(tenant string, n, cost int64, edges [4]int64) driver.Charge {
	return driver.Charge{Kind: "hooks_month", Tenant: tenant,
		Window: driver.Window{Max: n, Cost: cost, Edges: edges}}
}

// hitUntilDenied hits c locally until it is denied, checking each
// Result's report of the window (CONTRACT §8.2): n − Used is what this
// node may still admit, the denial waits for the window's end. It
// returns the units admitted.
func hitUntilDenied(t *testing.T, fb *Conn, c driver.Charge, left int64, end int64) int64 {
	t.Helper()
	var took int64
	for range 1000 {
		res, err := fb.local.hit([]driver.Charge{c}, nil)
		if err != nil || !res.Local {
			t.Fatalf("local hit: %+v %v", res, err)
		}
		b := res.Buckets[0]
		if res.Outcome != driver.OK {
			wait := time.Duration(end-fb.local.clock()) * time.Microsecond
			if res.Outcome != driver.RateLimited || !b.Denied || res.RetryAfter < wait ||
				res.RetryAfter > wait+time.Millisecond {
				t.Errorf("denial %+v, want rate_limited, denied, retry-after %v (the window's end)",
					res, wait)
			}
			if got := max(c.Window.Max-b.Used, 0); got != left-took {
				t.Errorf("denied with n − Used = %d, want %d left", got, left-took)
			}
			return took
		}
		took += c.Window.Cost
		if got := max(c.Window.Max-b.Used, 0); got != left-took {
			t.Errorf("after %d units n − Used = %d, want %d left to this node", took, got, left-took)
		}
	}
	t.Fatal("never denied")
	return 0
}

// TestWindowShareOfWhatWasLeft: while degraded, a node admits in a quota's
// window its share of what was left at the count a shared Hit last
// reported, floor(s × (n − U)), all its outages together; in a window it
// saw no count of, its share of n (CONTRACT §8.2). A local store that
// counted the window from 0 against n, or that forgot U, admits more
// and fails.
func TestWindowShareOfWhatWasLeft(t *testing.T) {
	var now atomic.Int64
	start := int64(1_800_000_000_000_000)
	now.Store(start + 1000)
	fb, shared := quotaConn(t, OfNodes(4), &now)
	ctx := context.Background()
	edges := hourEdges(start)
	end := edges[2]
	const n = 100
	one := windowCharge("acme", n, 1, edges)
	for i := range 60 {
		res, err := fb.Hit(ctx, []driver.Charge{one}, nil)
		if err != nil || res.Local || res.Outcome != driver.OK || res.Buckets[0].Used != int64(i+1) {
			t.Fatalf("shared hit %d: %+v %v", i+1, res, err)
		}
	}
	// Outage 1: a quarter of the 40 left.
	if got := hitUntilDenied(t, fb, one, 10, end); got != 10 {
		t.Errorf("outage 1 admitted %d of 40 left at a share of 1/4, want 10", got)
	}
	// Back: the shared count, missing the 10, goes on from 60 to 80.
	for range 20 {
		if res, err := fb.Hit(ctx, []driver.Charge{one}, nil); err != nil || res.Outcome != driver.OK {
			t.Fatalf("shared hit: %+v %v", res, err)
		}
	}
	// Outage 2, same window: a quarter of 20 is 5, which outage 1 took.
	if got := hitUntilDenied(t, fb, one, 0, end); got != 0 {
		t.Errorf("outage 2 admitted %d more, want 0: floor(20/4) = 5 ≤ the 10 taken", got)
	}

	// A tenant whose count this node never saw: a quarter of n.
	if _, err := shared.Hit(ctx, []driver.Charge{windowCharge("other", n, 50, edges)}, nil); err != nil {
		t.Fatal(err)
	}
	if got := hitUntilDenied(t, fb, windowCharge("other", n, 1, edges), 25, end); got != 25 {
		t.Errorf("a window never seen admitted %d, want 25 (n/4)", got)
	}

	// Charges of 7 units: floor(25/7) = 3 of them fit a fresh tenant's 25.
	if got := hitUntilDenied(t, fb, windowCharge("bytes", n, 7, edges), 25, end); got != 21 {
		t.Errorf("charges of 7 admitted %d units of 25, want 21", got)
	}

	// A window that begins during the outage starts at a quarter of n
	// whatever the last one's count was.
	now.Store(end + 1)
	next := hourEdges(end)
	if got := hitUntilDenied(t, fb, windowCharge("acme", n, 1, next), 25, next[2]); got != 25 {
		t.Errorf("the next window admitted %d, want 25 (n/4)", got)
	}
}

// TestWindowShareSeen: the count a shared Peek or Hit reports is
// remembered for the window the store counted in, found by its
// reset-after even when the store's clock is in the next window; a larger
// count raises U, a smaller one (an answer overtaken) does not lower it.
// Reset forgets the tenant's windows.
func TestWindowShareSeen(t *testing.T) {
	var now atomic.Int64
	start := int64(1_800_000_000_000_000)
	now.Store(start + 1000)
	fb, _ := quotaConn(t, OfNodes(2), &now)
	edges := hourEdges(start)
	c := windowCharge("acme", 100, 1, edges)
	w := fb.local.windows
	seen := func() (int64, bool) {
		sh := w.shard("acme")
		sh.mu.Lock()
		defer sh.mu.Unlock()
		e, ok := sh.m[windowKey{tenant: "acme", kind: "hooks_month", end: edges[2]}]
		return e.used, ok
	}
	report := func(used int64, resetAfter time.Duration) *driver.Result {
		r := &driver.Result{Outcome: driver.OK, NBuckets: 1}
		r.Buckets[0] = driver.Bucket{Used: used, ResetAfter: resetAfter}
		return r
	}
	w.saw([]driver.Charge{c}, report(30, time.Duration(edges[2]-now.Load())*time.Microsecond))
	w.saw([]driver.Charge{c}, report(20, time.Duration(edges[2]-now.Load())*time.Microsecond))
	if u, ok := seen(); !ok || u != 30 {
		t.Errorf("U = %d (%v) after counts 30 then 20, want 30", u, ok)
	}
	// The store's clock a minute early, in the window before: its
	// reset-after points at edges[1], another window.
	w.saw([]driver.Charge{c}, report(99, time.Minute))
	if u, _ := seen(); u != 30 {
		t.Errorf("U = %d after a count of the window before, want 30", u)
	}
	if got := w.len(); got != 2 {
		t.Errorf("%d windows remembered, want 2", got)
	}
	if err := fb.Reset(context.Background(), "acme"); err != nil {
		t.Fatal(err)
	}
	if _, ok := seen(); ok || w.len() != 0 {
		t.Errorf("Reset left %d windows remembered, want 0", w.len())
	}
}

// TestWindowsBounded: the windows remembered stay within their cap
// (CONTRACT §8.8), however many tenants are seen; the ended ones go
// first.
func TestWindowsBounded(t *testing.T) {
	var now atomic.Int64
	start := int64(1_800_000_000_000_000)
	now.Store(start + 1000)
	w := newWindows(OfNodes(2), func() int64 { return now.Load() }, 64)
	edges := hourEdges(start)
	r := &driver.Result{Outcome: driver.OK, NBuckets: 1}
	r.Buckets[0] = driver.Bucket{Used: 1, ResetAfter: time.Duration(edges[2]-now.Load()) * time.Microsecond}
	for i := range 10_000 {
		w.saw([]driver.Charge{windowCharge(fmt.Sprint("t", i), 100, 1, edges)}, r)
	}
	if got := w.len(); got > 64 || got < 32 {
		t.Errorf("%d windows remembered of 10 000 seen, cap 64", got)
	}
	// The window ended: one more seen in each shard sweeps it.
	now.Store(edges[2] + 1)
	next := hourEdges(edges[2])
	r.Buckets[0].ResetAfter = time.Duration(next[2]-now.Load()) * time.Microsecond
	for i := range 10_000 {
		w.saw([]driver.Charge{windowCharge(fmt.Sprint("u", i), 100, 1, next)}, r)
	}
	for i := range w.shards {
		for k := range w.shards[i].m {
			if k.end <= now.Load() {
				t.Fatalf("an ended window kept: %+v", k)
			}
		}
	}
}

// TestWindowShareShadowPeekConcurrent: a shadow quota's window never
// denies locally, and reads Denied past this node's allowance; a local
// Peek reports the window as the next local Hit meets it; Hits from many
// goroutines admit the allowance exactly, the window seeded once.
func TestWindowShareShadowPeekConcurrent(t *testing.T) {
	var now atomic.Int64
	start := int64(1_800_000_000_000_000)
	now.Store(start + 1000)
	fb, _ := quotaConn(t, OfNodes(4), &now)
	edges := hourEdges(start)
	shadow := windowCharge("shadow", 100, 1, edges)
	shadow.Shadow = true
	for i := range 30 {
		res, err := fb.local.hit([]driver.Charge{shadow}, nil)
		if err != nil || res.Outcome != driver.OK {
			t.Fatalf("shadow hit %d: %+v %v, want OK", i+1, res, err)
		}
		if b := res.Buckets[0]; b.Denied != (i >= 25) || !b.Shadow {
			t.Errorf("shadow hit %d: %+v, want Denied past the 25 of this node's share", i+1, b)
		}
	}

	c := windowCharge("peek", 100, 1, edges)
	if got := hitUntilDenied(t, fb, c, 25, edges[2]); got != 25 {
		t.Fatalf("admitted %d, want 25", got)
	}
	if res := fb.local.peek([]driver.Charge{c}); res.Outcome != driver.RateLimited ||
		!res.Buckets[0].Denied || res.Buckets[0].Used != 100 {
		t.Errorf("local Peek of a window this node used up: %+v, want rate_limited, Used 100", res)
	}

	// A window this node saw at 60 and never charged locally: the first
	// local Peek already reports the 90 that are not this node's.
	fresh := windowCharge("fresh", 100, 1, edges)
	seen := &driver.Result{Outcome: driver.OK, NBuckets: 1}
	seen.Buckets[0] = driver.Bucket{Used: 60,
		ResetAfter: time.Duration(edges[2]-now.Load()) * time.Microsecond}
	fb.local.windows.saw([]driver.Charge{fresh}, seen)
	if res := fb.local.peek([]driver.Charge{fresh}); res.Outcome != driver.OK ||
		res.Buckets[0].Used != 90 {
		t.Errorf("local Peek of a window seen at 60: %+v, want OK, Used 90 (10 left here)", res)
	}

	conc := windowCharge("concurrent", 100, 1, edges)
	var admitted atomic.Int64
	done := make(chan struct{})
	for range 8 {
		go func() {
			defer func() { done <- struct{}{} }()
			for range 20 {
				res, err := fb.local.hit([]driver.Charge{conc}, nil)
				if err != nil {
					t.Error(err)
					return
				}
				if res.Outcome == driver.OK {
					admitted.Add(1)
				}
			}
		}()
	}
	for range 8 {
		<-done
	}
	if got := admitted.Load(); got != 25 {
		t.Errorf("8 goroutines admitted %d, want 25", got)
	}
}

// BenchmarkQuotaWindows: bytes/window is the heap a remembered window
// holds, its tenant of 16 bytes included (CONTRACT §8.8); saw is what a
// shared Hit with a quota pays to be remembered, its window known.
func BenchmarkQuotaWindows(b *testing.B) {
	start := int64(1_800_000_000_000_000)
	edges := hourEdges(start)
	clock := func() int64 { return start + 1000 }
	r := &driver.Result{Outcome: driver.OK, NBuckets: 1}
	r.Buckets[0] = driver.Bucket{Used: 1, ResetAfter: time.Duration(edges[2]-clock()) * time.Microsecond}
	b.Run("memory", func(b *testing.B) {
		w := newWindows(OfNodes(8), clock, 2*b.N+windowShards*16)
		charges := make([]driver.Charge, b.N)
		for i := range charges {
			charges[i] = windowCharge(fmt.Sprintf("tenant-%09d", i), 10_000, 1, edges)
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		b.ResetTimer()
		for i := range charges {
			w.saw(charges[i:i+1], r)
		}
		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&after) // the charges still held: not counted
		if w.len() != b.N {
			b.Fatalf("%d windows remembered, want %d", w.len(), b.N)
		}
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(b.N), "bytes/window")
		runtime.KeepAlive(w)
		runtime.KeepAlive(charges)
	})
	b.Run("saw", func(b *testing.B) {
		w := newWindows(OfNodes(8), clock, maxWindows)
		c := []driver.Charge{windowCharge("tenant-000000001", 10_000, 1, edges)}
		w.saw(c, r)
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			w.saw(c, r)
		}
	})
}
