package postgres

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/internal/testing/testserver"
)

// The driver-level tests of calendar quota windows (CONTRACT §3.2) on a
// real PostgreSQL: window charges are sent to the driver as the Store
// builds them, with edges around the server's now.

// openConn opens the driver itself on raw, closed when t ends.
func openConn(t testing.TB, raw string) driver.Conn {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Driver{}.Open(driver.Config{URL: u, KeyPrefix: "fleetstore", Timeout: 5 * time.Second,
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

// TestWindows: on one server, exactly Max units conform in a window and
// the next is denied with the time to the window's end; Used and
// ResetAfter are reported and Peek reads them; the window after counts
// from zero; Reset clears the windows; a charge none of whose windows
// holds the server's now is an error marked ErrorReply with nothing
// written; all-or-nothing with the buckets both ways; and Hits of several
// Stores at once admit exactly Max.
func TestWindows(t *testing.T) {
	srv := testserver.StartPostgres(t)
	admin := adminPool(t, srv)
	c := openConn(t, srv.URL())
	ctx := context.Background()
	peek := func(charges ...driver.Charge) driver.Result {
		t.Helper()
		p, err := c.(driver.Peeker).Peek(ctx, charges)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	edges := edgesAround(time.Now(), time.Hour, 30*time.Minute)
	end := time.UnixMicro(edges[2])

	t.Run("counts", func(t *testing.T) {
		tenant := "counts"
		for i := int64(1); i <= 5; i++ {
			res, err := c.Hit(ctx, []driver.Charge{windowCharge(tenant, "month", 10, 2, edges)}, nil)
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
		p := peek(windowCharge(tenant, "month", 10, 1, edges), windowCharge(tenant, "week", 10, 1, edges))
		if p.NBuckets != 2 || p.Buckets[0].Used != 10 || p.Buckets[1].Used != 0 || p.Buckets[0].ResetAfter <= 0 ||
			p.Buckets[0].ResetAfter > time.Until(end)+time.Second {
			t.Fatalf("peek: %+v, want 10 and 0 used, reset at the window's end", p)
		}
		var n int64
		if err := admin.QueryRow(ctx, "SELECT count(*) FROM fleetstore.windows_v1 WHERE kind = 'week'").Scan(&n); err != nil || n != 0 {
			t.Fatalf("%d rows of the week's window after a Peek (%v), want none written", n, err)
		}
		next := edgesAround(time.Now(), time.Hour, -30*time.Minute) // now in [E2, E3)
		res, err = c.Hit(ctx, []driver.Charge{windowCharge(tenant, "month", 10, 1, next)}, nil)
		if err != nil || res.Outcome != driver.OK || res.Buckets[0].Used != 1 {
			t.Fatalf("hit in the next window: %+v %v, want OK with 1 used", res, err)
		}
		if err := c.Reset(ctx, tenant); err != nil {
			t.Fatal(err)
		}
		if p := peek(windowCharge(tenant, "month", 10, 1, edges)); p.Buckets[0].Used != 0 {
			t.Fatalf("peek after Reset: %+v, want 0 used", p)
		}
	})

	t.Run("outside", func(t *testing.T) {
		tenant := "outside"
		ahead := edgesAround(time.Now().Add(time.Hour), time.Minute, 30*time.Second)
		behind := edgesAround(time.Now().Add(-time.Hour), time.Minute, 30*time.Second)
		for _, e := range [][4]int64{ahead, behind} {
			charges := []driver.Charge{gcraCharge(tenant, time.Second, 10), windowCharge(tenant, "month", 10, 1, e)}
			cl := driver.Claim{Tenant: tenant, SourceID: "s", Key: "k", HookID: "h", TTL: time.Hour, PendingTTL: time.Hour}
			_, err := c.Hit(ctx, charges, &cl)
			var reply *driver.ReplyError
			if !errors.As(err, &reply) || !strings.Contains(err.Error(), "outside the windows") {
				t.Fatalf("hit: %v, want an error marked ErrorReply", err)
			}
			if _, err := c.(driver.Peeker).Peek(ctx, charges); !errors.As(err, &reply) {
				t.Fatalf("peek: %v, want an error marked ErrorReply", err)
			}
		}
		var n int64
		err := admin.QueryRow(ctx, "SELECT (SELECT count(*) FROM fleetstore.buckets_v1 WHERE tenant = $1) + "+
			"(SELECT count(*) FROM fleetstore.windows_v1 WHERE tenant = $1) + "+
			"(SELECT count(*) FROM fleetstore.claims_v1 WHERE tkey = $2)", []byte(tenant),
			tenantKey("fleetstore", tenant)).Scan(&n)
		if err != nil || n != 0 {
			t.Fatalf("%d rows written (%v), want none", n, err)
		}
	})

	t.Run("all or nothing", func(t *testing.T) {
		tenant := "aon"
		bucket := gcraCharge(tenant, time.Hour, 2) // two Hits an hour
		quota := windowCharge(tenant, "month", 1, 1, edges)
		if res, err := c.Hit(ctx, []driver.Charge{bucket, quota}, nil); err != nil || res.Outcome != driver.OK {
			t.Fatalf("first hit: %+v %v", res, err)
		}
		lead := peek(bucket).Buckets[0].ResetAfter
		res, err := c.Hit(ctx, []driver.Charge{bucket, quota}, nil)
		if err != nil || res.Outcome != driver.RateLimited || res.Buckets[1].Used != 1 {
			t.Fatalf("hit over the quota: %+v %v, want RateLimited", res, err)
		}
		if l := peek(bucket).Buckets[0].ResetAfter; l > lead {
			t.Fatalf("a Hit denied by its quota moved the bucket: reset after %v, was %v", l, lead)
		}
		day := windowCharge(tenant, "day", 5, 1, edges)
		c.Hit(ctx, []driver.Charge{bucket}, nil) // the bucket's second Hit
		res, err = c.Hit(ctx, []driver.Charge{bucket, day}, nil)
		if err != nil || res.Outcome != driver.RateLimited || res.Buckets[1].Used != 0 {
			t.Fatalf("hit over the bucket: %+v %v, want RateLimited with 0 used", res, err)
		}
		if p := peek(day); p.Buckets[0].Used != 0 {
			t.Fatalf("a Hit denied by its bucket counted in its quota: %+v", p)
		}
		cl := driver.Claim{Tenant: tenant, SourceID: "s", Key: "k", HookID: "h1", TTL: time.Hour, PendingTTL: time.Hour}
		week := windowCharge(tenant, "week", 5, 1, edges)
		if res, err := c.Hit(ctx, []driver.Charge{week}, &cl); err != nil || res.Outcome != driver.OK {
			t.Fatalf("claim hit: %+v %v", res, err)
		}
		if res, err := c.Hit(ctx, []driver.Charge{week}, &cl); err != nil || res.Outcome != driver.OK ||
			res.Buckets[0].Used != 1 {
			t.Fatalf("own retry: %+v %v, want OK with 1 used", res, err)
		}
		other := cl
		other.HookID = "h2"
		if res, err := c.Hit(ctx, []driver.Charge{week}, &other); err != nil || res.Outcome != driver.Pending ||
			res.Buckets[0].Used != 1 {
			t.Fatalf("pending: %+v %v, want Pending with 1 used", res, err)
		}
	})

	t.Run("concurrent", func(t *testing.T) {
		tenant := "concurrent"
		const stores, callers, perCaller, quota = 4, 4, 10, 50
		conns := make([]driver.Conn, stores)
		for i := range conns {
			conns[i] = openConn(t, srv.URL())
		}
		var ok, denied atomic.Int64
		var wg sync.WaitGroup
		for i := range stores * callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range perCaller {
					res, err := conns[i%stores].Hit(ctx, []driver.Charge{gcraCharge(tenant, time.Microsecond, 1<<20),
						windowCharge(tenant, "month", quota, 1, edges)}, nil)
					switch {
					case err != nil:
						t.Error(err)
						return
					case res.Outcome == driver.OK:
						ok.Add(1)
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
	})
}

// TestWindowSweep: a window's row expires at the window's end: the
// conformance records list it until then, and the sweep deletes it after.
func TestWindowSweep(t *testing.T) {
	srv := testserver.StartPostgres(t)
	admin := adminPool(t, srv)
	c := openConn(t, srv.URL()+"&sweep_interval=100ms")
	ctx := context.Background()
	edges := edgesAround(time.Now(), 10*time.Second, 2*time.Second)
	if res, err := c.Hit(ctx, []driver.Charge{windowCharge("t", "month", 10, 1, edges)}, nil); err != nil ||
		res.Outcome != driver.OK {
		t.Fatalf("hit: %+v %v", res, err)
	}
	recs, err := records(admin)(ctx, "fleetstore", "t")
	if err != nil || len(recs) != 1 || recs[0].TTL <= 0 || recs[0].TTL > time.Until(time.UnixMicro(edges[2]))+time.Second {
		t.Fatalf("records %v %v, want the window's row expiring at its end", recs, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int64
		if err := admin.QueryRow(ctx, "SELECT count(*) FROM fleetstore.windows_v1").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d window rows 8s after the window's end, want swept", n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if time.Now().Before(time.UnixMicro(edges[2])) {
		t.Fatal("the window's row was deleted before the window's end")
	}
}

// TestSchemaUpgrade: a schema installed by the driver version before
// quotas (no windows_v1, hit_v2, peek_v2 or sweep_v2) is brought up to
// date by the first call that finds a function missing, and keeps its
// buckets.
func TestSchemaUpgrade(t *testing.T) {
	srv := testserver.StartPostgres(t)
	admin := adminPool(t, srv)
	ctx := context.Background()
	if _, err := admin.Exec(ctx, SchemaSQL("fleetstore")); err != nil {
		t.Fatal(err)
	}
	// The earlier version's schema: the tables and functions it shares
	// with this one, and a bucket in it.
	_, err := admin.Exec(ctx, `
		DROP FUNCTION fleetstore.hit_v2, fleetstore.peek_v2, fleetstore.sweep_v2, fleetstore.windows_v2;
		DROP TABLE fleetstore.windows_v1;
		INSERT INTO fleetstore.buckets_v1 VALUES ('fleetstore', 't', 'hooks', fleetstore.now_v1() + 3600000000)`)
	if err != nil {
		t.Fatal(err)
	}
	c := openConn(t, srv.URL())
	bucket := gcraCharge("t", time.Hour, 2)
	edges := edgesAround(time.Now(), time.Hour, 30*time.Minute)
	p, err := c.(driver.Peeker).Peek(ctx, []driver.Charge{bucket, windowCharge("t", "month", 5, 1, edges)})
	if err != nil || p.Buckets[0].ResetAfter < 59*time.Minute || p.Buckets[1].Used != 0 {
		t.Fatalf("peek on the earlier schema: %+v %v, want the bucket kept, the schema brought up to date", p, err)
	}
	res, err := c.Hit(ctx, []driver.Charge{bucket, windowCharge("t", "month", 5, 1, edges)}, nil)
	if err != nil || res.Outcome != driver.OK || res.Buckets[1].Used != 1 || res.Buckets[0].ResetAfter < 119*time.Minute {
		t.Fatalf("hit: %+v %v, want OK charged on the kept bucket", res, err)
	}
}

// BenchmarkWindowRowBytes measures what a quota window takes on disk:
// 2 000 tenants (24-byte ids, the memcached driver's memClaim shape) each
// charge a monthly hooks quota under the default key_prefix; the table's
// and its index's pages are divided among the rows, after a VACUUM. The
// package doc's Schema section quotes its figures.
//
//	go test -run '^$' -bench WindowRowBytes -benchtime 1x ./drivers/postgres
func BenchmarkWindowRowBytes(b *testing.B) {
	for range b.N {
		srv := testserver.StartPostgres(b)
		admin := adminPool(b, srv)
		c := openConn(b, srv.URL()+"&sweep_interval=off")
		ctx := context.Background()
		edges := edgesAround(time.Now(), 31*24*time.Hour, 15*24*time.Hour)
		const n = 2000
		for i := range n {
			tenant := fmt.Sprintf("tenant-%s-%06d", "k3v9q2x7lm", i)
			res, err := c.Hit(ctx, []driver.Charge{windowCharge(tenant, driver.Hooks, 20_000, 10_000, edges)}, nil)
			if err != nil || res.Outcome != driver.OK {
				b.Fatalf("hit: %+v %v", res, err)
			}
		}
		if _, err := admin.Exec(ctx, "VACUUM ANALYZE fleetstore.windows_v1"); err != nil {
			b.Fatal(err)
		}
		var rows, tuple, heap, index int64
		err := admin.QueryRow(ctx, `SELECT count(*), max(pg_column_size(w.*)),
			pg_relation_size('fleetstore.windows_v1'), pg_indexes_size('fleetstore.windows_v1')
			FROM fleetstore.windows_v1 w`).Scan(&rows, &tuple, &heap, &index)
		if err != nil || rows != n {
			b.Fatalf("%d rows (%v), want %d", rows, err, n)
		}
		b.ReportMetric(float64(tuple), "tuple-B/window")
		b.ReportMetric(float64(heap)/n, "heap-B/window")
		b.ReportMetric(float64(index)/n, "index-B/window")
	}
}

// TestWindowSharedStart: a kind whose period changes (a plan of a day
// moved to one of a week, on a Monday) meets two windows that start at
// the same instant. They count the same units, and the count lasts to
// the end of the window charged last: a week that started with a day's
// row does not start over at the day's end (Q1, Q2).
func TestWindowSharedStart(t *testing.T) {
	c := openConn(t, testserver.StartPostgres(t).URL())
	ctx := context.Background()
	now := time.Now()
	start := now.Add(-time.Second).UnixMicro()
	short := [4]int64{start - 1e6, start, now.Add(2 * time.Second).UnixMicro(), now.Add(4 * time.Second).UnixMicro()}
	long := [4]int64{start - 1e6, start, now.Add(time.Minute).UnixMicro(), now.Add(2 * time.Minute).UnixMicro()}
	hit := func(edges [4]int64, maxUnits int64) driver.Outcome {
		t.Helper()
		res, err := c.Hit(ctx, []driver.Charge{windowCharge("acme", "quota", maxUnits, 1, edges)}, nil)
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
