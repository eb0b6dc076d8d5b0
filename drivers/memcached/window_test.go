package memcached

import (
	"context"
	"errors"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bradfitz/gomemcache/memcache"
	"go.uber.org/zap"

	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/internal/testing/testserver"
)

// The driver-level tests of calendar quota windows (CONTRACT §3.2) on a
// real memcached: window charges are sent to the driver as the Store
// builds them, with edges around the driver's now.

// openConn opens the driver itself on addrs with t's key_prefix.
func openConn(t testing.TB, addrs []string) driver.Conn {
	t.Helper()
	u, err := url.Parse("memcached://" + strings.Join(addrs, ","))
	if err != nil {
		t.Fatal(err)
	}
	c, err := Driver{}.Open(driver.Config{URL: u, KeyPrefix: testPrefix(t), Timeout: 5 * time.Second,
		Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// edgesAround is three windows of length d, the middle one holding now
// and ending after left.
func edgesAround(now time.Time, d, left time.Duration) [4]int64 {
	e2 := now.Add(left).UnixMicro()
	us := d.Microseconds()
	return [4]int64{e2 - 2*us, e2 - us, e2, e2 + us}
}

func windowCharge(tenant string, kind driver.Kind, maxUnits, cost int64, edges [4]int64) driver.Charge {
	return driver.Charge{Kind: kind, Tenant: tenant, Window: driver.Window{Max: maxUnits, Cost: cost, Edges: edges}}
}

func gcraCharge(tenant string, inc time.Duration, burst int64) driver.Charge {
	return driver.Charge{Kind: driver.Hooks, Tenant: tenant, Increment: inc, Capacity: inc * time.Duration(burst)}
}

// TestWindowCounts: exactly Max units conform in a window, the next is
// denied with the time to the window's end; Used and ResetAfter are
// reported on every answer and by Peek, which writes nothing.
func TestWindowCounts(t *testing.T) {
	t.Parallel()
	addrs := startServers(t, 1)
	c := openConn(t, addrs)
	ctx := context.Background()
	tenant := "t-" + randName()
	edges := edgesAround(time.Now(), time.Hour, 30*time.Minute)
	end := time.UnixMicro(edges[2])
	for i := int64(1); i <= 5; i++ {
		ch := windowCharge(tenant, "month", 10, 2, edges)
		res, err := c.Hit(ctx, []driver.Charge{ch}, nil)
		if err != nil || res.Outcome != driver.OK || res.NBuckets != 1 || res.Buckets[0].Used != 2*i {
			t.Fatalf("hit %d: %+v %v, want OK with %d used", i, res, err, 2*i)
		}
		if ra := res.Buckets[0].ResetAfter; ra <= 0 || ra > time.Until(end)+time.Second {
			t.Fatalf("hit %d: reset after %v, want the time to the window's end %v", i, ra, time.Until(end))
		}
	}
	res, err := c.Hit(ctx, []driver.Charge{windowCharge(tenant, "month", 10, 1, edges)}, nil)
	if err != nil || res.Outcome != driver.RateLimited || res.Buckets[0].Used != 10 {
		t.Fatalf("hit past the quota: %+v %v, want RateLimited with 10 used", res, err)
	}
	if wait := time.Until(end); res.RetryAfter < wait-time.Minute || res.RetryAfter > wait+time.Second {
		t.Fatalf("retry after %v, want about %v (the window's end)", res.RetryAfter, wait)
	}
	// Another kind and another tenant count apart.
	res, err = c.Hit(ctx, []driver.Charge{windowCharge(tenant, "day", 10, 1, edges)}, nil)
	if err != nil || res.Outcome != driver.OK || res.Buckets[0].Used != 1 {
		t.Fatalf("another kind: %+v %v, want OK with 1 used", res, err)
	}
	before := testserver.MemcachedStats(t, addrs[0], "")
	p, err := c.(driver.Peeker).Peek(ctx, []driver.Charge{windowCharge(tenant, "month", 10, 1, edges),
		windowCharge(tenant, "week", 10, 1, edges)})
	if err != nil || p.Buckets[0].Used != 10 || p.Buckets[1].Used != 0 || p.Buckets[0].ResetAfter <= 0 ||
		p.Buckets[0].ResetAfter > time.Until(end)+time.Second {
		t.Fatalf("peek: %+v %v, want 10 and 0 used, reset at the window's end", p, err)
	}
	after := testserver.MemcachedStats(t, addrs[0], "")
	if d := after["cmd_set"] - before["cmd_set"]; d != 0 {
		t.Fatalf("peek: %d sets, want none", d)
	}
	// The count is in the window that holds now: the window after starts
	// from zero, and one of the windows sent must hold now.
	next := edgesAround(time.Now(), time.Hour, -30*time.Minute) // now in [E2, E3)
	res, err = c.Hit(ctx, []driver.Charge{windowCharge(tenant, "month", 10, 1, next)}, nil)
	if err != nil || res.Outcome != driver.OK || res.Buckets[0].Used != 1 {
		t.Fatalf("hit in the next window: %+v %v, want OK with 1 used", res, err)
	}
	// The Reset of the tenant clears its windows.
	if err := c.Reset(ctx, tenant); err != nil {
		t.Fatal(err)
	}
	res, err = c.Hit(ctx, []driver.Charge{windowCharge(tenant, "month", 10, 1, edges)}, nil)
	if err != nil || res.Outcome != driver.OK || res.Buckets[0].Used != 1 {
		t.Fatalf("hit after Reset: %+v %v, want OK with 1 used", res, err)
	}
}

// TestWindowOutside: a window charge none of whose windows holds the
// driver's now is an error marked ErrorReply, and the Hit writes nothing,
// not even its other charges.
func TestWindowOutside(t *testing.T) {
	t.Parallel()
	addrs := startServers(t, 1)
	c := openConn(t, addrs)
	ctx := context.Background()
	tenant := "t-" + randName()
	ahead := edgesAround(time.Now().Add(time.Hour), time.Minute, 30*time.Second)
	behind := edgesAround(time.Now().Add(-time.Hour), time.Minute, 30*time.Second)
	for _, edges := range [][4]int64{ahead, behind} {
		charges := []driver.Charge{gcraCharge(tenant, time.Second, 10), windowCharge(tenant, "month", 10, 1, edges)}
		_, err := c.Hit(ctx, charges, nil)
		var reply *driver.ReplyError
		if !errors.As(err, &reply) || !strings.Contains(err.Error(), "outside the windows") {
			t.Fatalf("hit: %v, want an error marked ErrorReply", err)
		}
		if _, err := c.(driver.Peeker).Peek(ctx, charges); !errors.As(err, &reply) {
			t.Fatalf("peek: %v, want an error marked ErrorReply", err)
		}
	}
	mc := memcache.New(addrs...)
	defer mc.Close()
	if _, err := mc.Get(keys{prefix: testPrefix(t)}.bucket(tenant)); err != memcache.ErrCacheMiss {
		t.Fatalf("bucket item: %v, want none written", err)
	}
}

// TestWindowAllOrNothing: a Hit denied by its quota takes nothing from its
// bucket, and one denied by its bucket takes nothing from its quota
// (CONTRACT G3 extended); a Duplicate charges neither.
func TestWindowAllOrNothing(t *testing.T) {
	t.Parallel()
	addrs := startServers(t, 1)
	c := openConn(t, addrs)
	ctx := context.Background()
	tenant := "t-" + randName()
	edges := edgesAround(time.Now(), time.Hour, 30*time.Minute)
	bucket := gcraCharge(tenant, time.Hour, 2) // two Hits an hour
	quota := windowCharge(tenant, "month", 1, 1, edges)
	peek := func() (lead time.Duration, used int64) {
		t.Helper()
		p, err := c.(driver.Peeker).Peek(ctx, []driver.Charge{bucket, quota})
		if err != nil {
			t.Fatal(err)
		}
		return p.Buckets[0].ResetAfter, p.Buckets[1].Used
	}
	res, err := c.Hit(ctx, []driver.Charge{bucket, quota}, nil)
	if err != nil || res.Outcome != driver.OK || res.Buckets[1].Used != 1 {
		t.Fatalf("first hit: %+v %v", res, err)
	}
	lead, _ := peek()
	// Denied by the quota: the bucket keeps its TAT.
	res, err = c.Hit(ctx, []driver.Charge{bucket, quota}, nil)
	if err != nil || res.Outcome != driver.RateLimited || res.Buckets[1].Used != 1 {
		t.Fatalf("hit over the quota: %+v %v, want RateLimited", res, err)
	}
	if l, _ := peek(); l > lead {
		t.Fatalf("a Hit denied by its quota moved the bucket: reset after %v, was %v", l, lead)
	}
	// Denied by the bucket: the quota keeps its count.
	quota2 := windowCharge(tenant, "day", 5, 1, edges)
	c.Hit(ctx, []driver.Charge{bucket}, nil) // the bucket's second Hit
	res, err = c.Hit(ctx, []driver.Charge{bucket, quota2}, nil)
	if err != nil || res.Outcome != driver.RateLimited || res.Buckets[1].Used != 0 {
		t.Fatalf("hit over the bucket: %+v %v, want RateLimited with 0 used", res, err)
	}
	p, err := c.(driver.Peeker).Peek(ctx, []driver.Charge{quota2})
	if err != nil || p.Buckets[0].Used != 0 {
		t.Fatalf("a Hit denied by its bucket counted in its quota: %+v %v", p, err)
	}
	// A Duplicate and a Pending charge nothing.
	cl := driver.Claim{Tenant: tenant, SourceID: "s", Key: "k", HookID: "h1", TTL: time.Hour, PendingTTL: time.Hour}
	quota3 := windowCharge(tenant, "week", 5, 1, edges)
	if res, err := c.Hit(ctx, []driver.Charge{quota3}, &cl); err != nil || res.Outcome != driver.OK {
		t.Fatalf("claim hit: %+v %v", res, err)
	}
	other := cl
	other.HookID = "h2"
	if res, err := c.Hit(ctx, []driver.Charge{quota3}, &other); err != nil || res.Outcome != driver.Pending ||
		res.Buckets[0].Used != 1 {
		t.Fatalf("pending: %+v %v, want Pending with 1 used", res, err)
	}
	if _, err := c.Commit(ctx, []driver.Claim{cl}); err != nil {
		t.Fatal(err)
	}
	if res, err := c.Hit(ctx, []driver.Charge{quota3}, &other); err != nil || res.Outcome != driver.Duplicate ||
		res.Buckets[0].Used != 1 {
		t.Fatalf("duplicate: %+v %v, want Duplicate with 1 used", res, err)
	}
}

// TestWindowConcurrent: Hits of several Stores at once, each its own
// driver with its own connections, admit exactly Max units in a window:
// the window count shares the bucket item's cas with the buckets. Every
// Hit carries a claim of its own, taken before the bucket item's cas: a
// Hit denied after a lost cas gives its claim back, so the claims of the
// denied Hits are free and those of the admitted ones pending.
func TestWindowConcurrent(t *testing.T) {
	t.Parallel()
	addrs := startServers(t, 2)
	const stores, callers, perCaller, quota = 4, 8, 10, 50
	conns := make([]driver.Conn, stores)
	for i := range conns {
		conns[i] = openConn(t, addrs)
	}
	tenant := "t-" + randName()
	edges := edgesAround(time.Now(), time.Hour, 30*time.Minute)
	claimOf := func(i int, hook string) *driver.Claim {
		return &driver.Claim{Tenant: tenant, SourceID: "s", Key: "k" + strconv.Itoa(i), HookID: hook,
			TTL: time.Hour, PendingTTL: time.Hour}
	}
	var ok, denied atomic.Int64
	admitted := make([]bool, stores*callers*perCaller)
	var wg sync.WaitGroup
	for i := range stores * callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bucket := gcraCharge(tenant, time.Microsecond, 1<<20)
			for j := range perCaller {
				n := i*perCaller + j
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				res, err := conns[i%stores].Hit(ctx, []driver.Charge{bucket, windowCharge(tenant, "month", quota, 1, edges)},
					claimOf(n, "h"))
				cancel()
				switch {
				case err != nil:
					t.Error(err)
					return
				case res.Outcome == driver.OK:
					ok.Add(1)
					admitted[n] = true
				default:
					denied.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if ok.Load() != quota || ok.Load()+denied.Load() != stores*callers*perCaller {
		t.Fatalf("%d OK and %d denied of %d Hits, want exactly %d OK", ok.Load(), denied.Load(),
			stores*callers*perCaller, quota)
	}
	ctx := context.Background()
	p, err := conns[0].(driver.Peeker).Peek(ctx, []driver.Charge{windowCharge(tenant, "month", quota, 1, edges)})
	if err != nil || p.Buckets[0].Used != quota {
		t.Fatalf("peek: %+v %v, want %d used", p, err, quota)
	}
	for n, took := range admitted {
		res, err := conns[0].Hit(ctx, nil, claimOf(n, "other"))
		want := map[bool]driver.Outcome{true: driver.Pending, false: driver.OK}[took]
		if err != nil || res.Outcome != want {
			t.Fatalf("claim %d of a Hit admitted %v: another hook's Hit %v %v, want %v", n, took, res.Outcome, err, want)
		}
	}
}

// TestWindowExpiry: the bucket item that holds a window's count expires at
// the window's end (within memcached's 2s granularity), when nothing
// else in it lasts longer, and a passed window is left out of the item.
func TestWindowExpiry(t *testing.T) {
	t.Parallel()
	addrs := startServers(t, 1)
	c := openConn(t, addrs)
	ctx := context.Background()
	tenant := "t-" + randName()
	edges := edgesAround(time.Now(), 20*time.Second, 10*time.Second)
	if res, err := c.Hit(ctx, []driver.Charge{windowCharge(tenant, "month", 10, 1, edges)}, nil); err != nil ||
		res.Outcome != driver.OK {
		t.Fatalf("hit: %+v %v", res, err)
	}
	recs, err := mcRecords(ctx, addrs, testPrefix(t), tenant)
	if err != nil || len(recs) != 1 {
		t.Fatalf("records %v %v, want the bucket item", recs, err)
	}
	left := time.Until(time.UnixMicro(edges[2]))
	if ttl := recs[0].TTL; ttl < left-time.Second || ttl > left+2*time.Second {
		t.Fatalf("bucket item TTL %v, want the window's end, %v away (2s granularity)", ttl, left)
	}
	// A window that passed is dropped at the next write.
	long := edgesAround(time.Now(), time.Hour, 30*time.Minute)
	mc := memcache.New(addrs...)
	defer mc.Close()
	key := keys{prefix: testPrefix(t)}.bucket(tenant)
	stale := bucketState{wins: []kindWindow{{"month", 1, 2, 5}, {"month", edges[1], edges[2], 1}}}
	if err := mc.Set(&memcache.Item{Key: key, Value: encodeBucket(stale, 0), Expiration: 60}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Hit(ctx, []driver.Charge{windowCharge(tenant, "day", 10, 1, long)}, nil); err != nil {
		t.Fatal(err)
	}
	it, err := mc.Get(key)
	if err != nil {
		t.Fatal(err)
	}
	b, err := parseBucket(it.Value)
	if err != nil || len(b.wins) != 2 || b.wins[0].kind != "month" || b.wins[0].start != edges[1] {
		t.Fatalf("item %q: %v, want the passed window left out", it.Value, err)
	}
}

// TestWindowItemBytes: what a quota window adds to its tenant's bucket
// item on a real memcached (`stats` bytes), as the package doc's Memory
// section says: 36 + len(kind) + the digits of its count. The tenant and
// key_prefix are memClaim's, the plan a webhook edge's: hooks and bytes
// buckets and a monthly hooks quota at 10 000 used.
func TestWindowItemBytes(t *testing.T) {
	t.Parallel()
	addrs := startServers(t, 1)
	u, _ := url.Parse("memcached://" + addrs[0])
	dc, err := Driver{}.Open(driver.Config{URL: u, KeyPrefix: "fleetstore", Timeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer dc.Close()
	ctx := context.Background()
	tenant := memClaim(0).Tenant
	edges := edgesAround(time.Now(), 31*24*time.Hour, 15*24*time.Hour)
	buckets := []driver.Charge{gcraCharge(tenant, time.Second, 100),
		{Kind: driver.Bytes, Tenant: tenant, Increment: time.Microsecond, Capacity: time.Second}}
	quota := windowCharge(tenant, driver.Hooks, 20_000, 10_000, edges)
	size := func() int64 {
		t.Helper()
		st := testserver.MemcachedStats(t, addrs[0], "")
		if st["curr_items"] != 1 {
			t.Fatalf("%d items, want the bucket item alone", st["curr_items"])
		}
		return st["bytes"]
	}
	if res, err := dc.Hit(ctx, buckets, nil); err != nil || res.Outcome != driver.OK {
		t.Fatalf("hit: %+v %v", res, err)
	}
	without := size()
	if res, err := dc.Hit(ctx, append(buckets, quota), nil); err != nil || res.Outcome != driver.OK {
		t.Fatalf("hit: %+v %v", res, err)
	}
	with := size()
	if doc := int64(36 + len(driver.Hooks) + len("10000")); with-without != doc {
		t.Errorf("a window adds %d bytes to the bucket item, the package doc says %d", with-without, doc)
	}
	t.Logf("bucket item: %d bytes with hooks and bytes buckets, %d with a monthly hooks quota too", without, with)
}

// TestWindowSharedStart: a kind whose period changes (a plan of a day
// moved to one of a week, on a Monday) meets two windows that start at
// the same instant. They count the same units, and the count lasts to
// the end of the window charged last: a week that started with a day's
// record does not start over at the day's end (Q1, Q2).
func TestWindowSharedStart(t *testing.T) {
	t.Parallel()
	addrs := startServers(t, 1)
	c := openConn(t, addrs)
	ctx := context.Background()
	tenant := "t-" + randName()
	now := time.Now()
	start := now.Add(-time.Second).UnixMicro()
	short := [4]int64{start - 1e6, start, now.Add(2 * time.Second).UnixMicro(), now.Add(4 * time.Second).UnixMicro()}
	long := [4]int64{start - 1e6, start, now.Add(time.Minute).UnixMicro(), now.Add(2 * time.Minute).UnixMicro()}
	hit := func(edges [4]int64, maxUnits int64) driver.Outcome {
		t.Helper()
		res, err := c.Hit(ctx, []driver.Charge{windowCharge(tenant, "quota", maxUnits, 1, edges)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return res.Outcome
	}
	if o := hit(short, 100); o != driver.OK {
		t.Fatalf("the short window's hit: %v", o)
	}
	for i := range 4 {
		if o := hit(long, 5); o != driver.OK {
			t.Fatalf("the long window's hit %d: %v, want OK (1 + %d of 5)", i+1, o, i+1)
		}
	}
	time.Sleep(time.Until(time.UnixMicro(short[2])) + 500*time.Millisecond)
	if o := hit(long, 5); o != driver.RateLimited {
		t.Errorf("past the short window's end: %v, want the long window's 5 spent", o)
	}
}
