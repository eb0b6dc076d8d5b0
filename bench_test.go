package fleetstore_test

import (
	"context"
	"errors"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/observe"
)

// The Hit of a webhook edge on the memory driver: two charges (hooks,
// bytes) and a claim on a fresh event key, no Commit. Capacities are
// generous, so every Hit is OK and takes the full write path (notok/op
// says otherwise). Keys are formatted before the timer starts.
// Target (issue 2, "Speed"): under 1µs and at most 3 allocs per Hit.
//
// The timed claims have a PendingTTL of 1ms, so the store reaches a
// steady state (claims expire and are swept as fast as they are taken)
// and ns/op does not depend on b.N through map growth. The live=1M
// variants run against a store that also holds a million live claims, as
// an edge keeping a day of committed keys does: the same work, with the
// claim map out of cache.

const (
	benchTenants = 1024
	benchLive    = 1_000_000
)

func BenchmarkHit(b *testing.B) {
	fresh := func(b *testing.B, opts ...fleetstore.Option) *fleetstore.Store {
		store, err := fleetstore.Open("memory://", opts...)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { store.Close() })
		return store
	}
	b.Run("single", func(b *testing.B) { benchHitSingle(b, fresh(b)) })
	b.Run("parallel", func(b *testing.B) { benchHitParallel(b, fresh(b)) })
	b.Run("single/observer=nop", func(b *testing.B) { benchHitSingle(b, fresh(b, fleetstore.WithObserver(nopObserver{}))) })
	b.Run("parallel/observer=nop", func(b *testing.B) { benchHitParallel(b, fresh(b, fleetstore.WithObserver(nopObserver{}))) })
	b.Run("single/live=1M", func(b *testing.B) { benchHitSingle(b, liveStore(b)) })
	b.Run("parallel/live=1M", func(b *testing.B) { benchHitParallel(b, liveStore(b)) })
	// The body charge as a shadow one (Limit.Shadow): the Store copies the
	// charges for the driver and reads the bucket itself.
	b.Run("single/shadow", func(b *testing.B) {
		benchHitSingle(b, fresh(b), func(h *benchHook) { h.charges[1].Shadow = true })
	})
}

// nopObserver is the cheapest Observer: the observer=nop variants show
// the cost of building and handing over an Event (fleetotel's BenchmarkHit
// shows OpenTelemetry's on top).
type nopObserver struct{}

func (nopObserver) Observe(context.Context, observe.Event) {}

func benchHitSingle(b *testing.B, store *fleetstore.Store, tweak ...func(*benchHook)) {
	keys := benchKeys(b.N)
	h := newBenchHook()
	for _, f := range tweak {
		f(&h)
	}
	ctx := context.Background()
	var notOK int
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := h.hit(ctx, store, benchTenant[i%benchTenants], keys[i])
		if err != nil {
			b.Fatal(err)
		}
		if res.Outcome != fleetstore.OK {
			notOK++
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(notOK)/float64(b.N), "notok/op")
}

func benchHitParallel(b *testing.B, store *fleetstore.Store) {
	// Goroutines take keys in chunks from one counter, so every Hit has a
	// fresh key without a shared atomic per Hit. A goroutine may leave part
	// of its last chunk unused: room for that.
	const chunk = 256
	keys := benchKeys(b.N + chunk*runtime.GOMAXPROCS(0))
	var next, notOK atomic.Int64
	var failed atomic.Pointer[error]
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		h := newBenchHook()
		var i, end, miss int64
		for pb.Next() {
			if i == end {
				end = next.Add(chunk)
				i = end - chunk
			}
			res, err := h.hit(ctx, store, benchTenant[i%benchTenants], keys[i])
			i++
			if err != nil {
				e := err // only this copy escapes, on the error path
				failed.CompareAndSwap(nil, &e)
				return
			}
			if res.Outcome != fleetstore.OK {
				miss++
			}
		}
		notOK.Add(miss)
	})
	b.StopTimer()
	if err := failed.Load(); err != nil {
		b.Fatal(*err)
	}
	b.ReportMetric(float64(notOK.Load())/float64(b.N), "notok/op")
}

// BenchmarkHitDegraded is BenchmarkHit's Hit on a Store whose shared
// store is out (every call refused) with a fallback of 8 nodes: the
// breaker is open, so each Hit is decided by the local memory store at
// this node's share, without touching the shared one (CONTRACT §8). Its
// goal is a memory Hit's cost.
func BenchmarkHitDegraded(b *testing.B) {
	degraded := func(b *testing.B) *fleetstore.Store {
		refused := errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
		conn := &fakeConn{hit: func(context.Context, []driver.Charge, *driver.Claim) (driver.Result, error) {
			return driver.Result{}, refused
		}, other: func(context.Context) error { return refused }}
		store, err := fleetstore.OpenDriver(&fakeDriver{conn: conn}, "fake://", fleetstore.WithFallback(fleetstore.Fallback{Nodes: 8}))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { store.Close() })
		h := newBenchHook()
		if res, err := h.hit(context.Background(), store, "trip", "trip"); err != nil || !res.Local {
			b.Fatalf("not degraded: %+v %v", res, err)
		}
		return store
	}
	b.Run("single", func(b *testing.B) { benchHitSingle(b, degraded(b)) })
	b.Run("parallel", func(b *testing.B) { benchHitParallel(b, degraded(b)) })
}

var benchTenant = func() []string {
	t := make([]string, benchTenants)
	for i := range t {
		t[i] = "tenant-" + strconv.Itoa(i)
	}
	return t
}()

// benchRun keeps keys of one benchmark run apart from the previous runs'
// on a shared store.
var benchRun atomic.Int64

// benchKeys returns n distinct provider event keys, UUID-sized.
func benchKeys(n int) []string {
	run := strconv.FormatInt(benchRun.Add(1), 10)
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "evt-" + run + "-" + strconv.Itoa(i) + "-5f0c-4a1e-9b1d-3c2a"
	}
	return keys
}

var (
	liveOnce sync.Once
	live     *fleetstore.Store
	liveErr  error
)

// liveStore is one store shared by the live=1M runs, holding benchLive
// pending claims that outlive the benchmark.
func liveStore(b *testing.B) *fleetstore.Store {
	liveOnce.Do(func() {
		live, liveErr = fleetstore.Open("memory://bench-live")
		if liveErr != nil {
			return
		}
		ctx := context.Background()
		claim := &fleetstore.Claim{SourceID: "github", HookID: "hook-0", TTL: time.Hour, PendingTTL: time.Hour}
		for i, key := range benchKeys(benchLive) {
			claim.Tenant, claim.Key = benchTenant[i%benchTenants], key
			if _, liveErr = live.Hit(ctx, nil, claim); liveErr != nil {
				return
			}
		}
	})
	if liveErr != nil {
		b.Fatal(liveErr)
	}
	return live
}

// benchHook is one goroutine's reused Hit arguments: only tenant and key
// change between Hits, as in an edge that reuses its buffers.
type benchHook struct {
	charges []fleetstore.Charge
	claim   *fleetstore.Claim
}

func newBenchHook() benchHook {
	return benchHook{
		charges: []fleetstore.Charge{
			{Kind: fleetstore.Hooks, Increment: time.Microsecond, Capacity: time.Hour},
			{Kind: fleetstore.Bytes, Increment: 4 * time.Microsecond, Capacity: time.Hour},
		},
		claim: &fleetstore.Claim{SourceID: "github", HookID: "hook-1", Node: "bench",
			TTL: 24 * time.Hour, PendingTTL: time.Millisecond},
	}
}

func (h *benchHook) hit(ctx context.Context, store *fleetstore.Store, tenant, key string) (fleetstore.Result, error) {
	h.charges[0].Tenant, h.charges[1].Tenant = tenant, tenant
	h.claim.Tenant, h.claim.Key = tenant, key
	return store.Hit(ctx, h.charges, h.claim)
}

// BenchmarkDegradedMemory reports what a degraded node holds in memory
// per hook, with the claim's strings as an edge makes them per request (a
// 16-byte tenant, a 36-byte GitHub delivery id, a 26-byte hook id):
// "commit" is a commit queued during an outage (its place in the outbox
// and its local committed claim), "hit" a claim a local Hit holds pending.
// ns/op is the degraded Commit's or Hit's cost.
func BenchmarkDegradedMemory(b *testing.B) {
	for _, op := range []string{"commit", "hit"} {
		b.Run(op, func(b *testing.B) { benchDegradedMemory(b, op) })
	}
}

func benchDegradedMemory(b *testing.B, op string) {
	refused := errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
	conn := &fakeConn{commit: func(context.Context, []driver.Claim) ([]error, error) { return nil, refused },
		hit: func(context.Context, []driver.Charge, *driver.Claim) (driver.Result, error) {
			return driver.Result{}, refused
		},
		other: func(context.Context) error { return refused }}
	store, err := fleetstore.OpenDriver(&fakeDriver{conn: conn}, "fake://",
		fleetstore.WithFallback(fleetstore.Fallback{Nodes: 8, OutboxSize: b.N + 1, LocalClaims: b.N + 1}))
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	ctx := context.Background()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	claims := make([]fleetstore.Claim, b.N)
	for i := range claims {
		n := strconv.Itoa(i)
		claims[i] = fleetstore.Claim{Tenant: "tenant-0000" + n[len(n)-1:] + "abcd", SourceID: "github",
			Key: "72d3162e-cc78-11e3-81ab-" + strconv.FormatInt(int64(100000000000+i), 16), HookID: "01J9Z3K6Q8" + strconv.FormatInt(int64(1e15+i), 10)[:16],
			Node: "edge-7", TTL: 72 * time.Hour, PendingTTL: time.Hour}
	}
	b.ResetTimer()
	for i := range claims {
		if op == "commit" {
			err = store.Commit(ctx, claims[i])
		} else {
			_, err = store.Hit(ctx, nil, &claims[i])
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	claims = nil // only the Store's references to the strings are left
	runtime.GC()
	runtime.ReadMemStats(&after)
	if s := store.FallbackStats(); op == "commit" && s.Outbox != b.N || op == "hit" && s.LocalDecisions != uint64(b.N) {
		b.Fatalf("stats %+v after %d %ss", s, b.N, op)
	}
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(b.N), "bytes/"+op)
}

// BenchmarkDegradedAccept is what a degraded node pays to accept a hook:
// a local Hit with its claim, then its Commit queued, with the outbox in
// memory and on disk (Fallback.OutboxDir: the Commit returns once its
// record is fsynced; parallel callers share fsyncs). heap-bytes/hook is
// the heap held per hook (its place in the outbox, its local claim, its
// place in the log), disk-bytes/hook the directory's size per commit.
func BenchmarkDegradedAccept(b *testing.B) {
	for _, outbox := range []string{"memory", "disk"} {
		for _, par := range []bool{false, true} {
			name := "outbox=" + outbox + "/single"
			if par {
				name = "outbox=" + outbox + "/parallel"
			}
			b.Run(name, func(b *testing.B) { benchDegradedAccept(b, outbox == "disk", par) })
		}
	}
}

func benchDegradedAccept(b *testing.B, disk, par bool) {
	refused := errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
	conn := &fakeConn{commit: func(context.Context, []driver.Claim) ([]error, error) { return nil, refused },
		hit: func(context.Context, []driver.Charge, *driver.Claim) (driver.Result, error) {
			return driver.Result{}, refused
		},
		other: func(context.Context) error { return refused }}
	fb := fleetstore.Fallback{Nodes: 8, OutboxSize: b.N + 1, LocalClaims: 2*b.N + 1}
	if disk {
		fb.OutboxDir = b.TempDir()
	}
	store, err := fleetstore.OpenDriver(&fakeDriver{conn: conn}, "fake://", fleetstore.WithFallback(fb))
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	keys := benchKeys(b.N)
	var next atomic.Int64
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	accept := func(h *benchHook, i int) {
		ctx := context.Background()
		tenant := benchTenant[i%benchTenants]
		h.claim.HookID = keys[i]
		if res, err := h.hit(ctx, store, tenant, keys[i]); err != nil || !res.Local || res.Outcome != fleetstore.OK {
			b.Errorf("local hit: %+v %v", res, err)
		}
		if err := store.Commit(ctx, *h.claim); err != nil {
			b.Errorf("queued commit: %v", err)
		}
	}
	b.ResetTimer()
	if par {
		b.SetParallelism(8) // webhook handlers block on their Commit
		b.RunParallel(func(pb *testing.PB) {
			h := newBenchHook()
			for pb.Next() {
				accept(&h, int(next.Add(1)-1))
			}
		})
	} else {
		h := newBenchHook()
		for i := range b.N {
			accept(&h, i)
		}
	}
	b.StopTimer()
	if s := store.FallbackStats(); s.Outbox != b.N {
		b.Fatalf("stats %+v after %d hooks", s, b.N)
	}
	keys = nil
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(b.N), "heap-bytes/hook")
	if disk {
		b.ReportMetric(float64(dirBytes(b, fb.OutboxDir))/float64(b.N), "disk-bytes/hook")
	}
}

// dirBytes is the size of the files in dir.
func dirBytes(b *testing.B, dir string) int64 {
	entries, err := os.ReadDir(dir)
	if err != nil {
		b.Fatal(err)
	}
	var n int64
	for _, e := range entries {
		if fi, err := e.Info(); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// BenchmarkReplay measures the replay of 10 000 commits queued during an
// outage, from the moment the shared store (the memory driver behind the
// flaky switch) answers again to the Store deciding shared with an empty
// outbox (the first probe's wait, 12.5–25ms, included): commits/s, with
// the outbox in memory and on disk (each batch's records acknowledged).
func BenchmarkReplay(b *testing.B) {
	const queued = 10_000
	for _, outbox := range []string{"memory", "disk"} {
		b.Run("outbox="+outbox, func(b *testing.B) {
			var took time.Duration
			for i := range b.N {
				d := newFlaky()
				fb := fleetstore.Fallback{Nodes: 2}
				if outbox == "disk" {
					fb.OutboxDir = b.TempDir()
				}
				store, err := fleetstore.OpenDriver(d, "memory://replay-"+strconv.Itoa(i), fleetstore.WithFallback(fb))
				if err != nil {
					b.Fatal(err)
				}
				d.set(refused)
				ctx := context.Background()
				claims := make([]fleetstore.Claim, queued)
				for j := range claims {
					claims[j] = hookClaim("evt-"+strconv.Itoa(j), "hook-"+strconv.Itoa(j))
				}
				const batch = 100 // as webhook handlers commit concurrently
				for j := 0; j < queued; j += batch {
					if err := store.Commit(ctx, claims[j:j+batch]...); err != nil {
						b.Fatal(err)
					}
				}
				start := time.Now()
				d.set(healthy)
				for s := store.FallbackStats(); s.Degraded || s.Outbox > 0; s = store.FallbackStats() {
					time.Sleep(100 * time.Microsecond)
				}
				took += time.Since(start)
				if s := store.FallbackStats(); s.Replayed != queued {
					b.Fatalf("stats %+v, want %d replayed", s, queued)
				}
				store.Close()
			}
			b.ReportMetric(float64(queued*b.N)/took.Seconds(), "commits/s")
		})
	}
}
