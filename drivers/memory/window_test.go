package memory_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/calendar"
	"github.com/fleetstore/fleetstore/driver"
)

// TestWindowSkewedNodes: two nodes whose clocks are a minute either side
// of the store's send different windows around a month's end; the store
// counts in the window holding its own clock, so their charges count in
// one window, the right one, and the count starts over when the store's
// clock, not a node's, passes the boundary (CONTRACT §3.2, G8).
func TestWindowSkewedNodes(t *testing.T) {
	f := newFixture(t)
	end := time.Date(2027, 2, 1, 0, 0, 0, 0, time.UTC) // January, 31 days, ends
	f.clock.set(end.Add(-30 * time.Second).UnixMicro())
	st := f.open(t, "skew?key_prefix=skew")
	q := fleetstore.MustLimit(fleetstore.NewQuota("hooks_month", 4, calendar.Month, nil))
	storeNow := func() time.Time { return time.UnixMicro(f.clock.now()) }
	ahead := func() time.Time { return storeNow().Add(time.Minute) } // already in February
	behind := func() time.Time { return storeNow().Add(-time.Minute) }
	hit := func(node func() time.Time) fleetstore.Result {
		t.Helper()
		return hit(t, st, []fleetstore.Charge{q.ChargeAt("acme", 1, node())}, nil)
	}

	// 30s before the store's boundary: both nodes count in January.
	for i, node := range []func() time.Time{ahead, behind, ahead, behind} {
		res := hit(node)
		if b := res.Quota()[0]; res.Outcome != fleetstore.OK || b.Used != int64(i+1) ||
			b.ResetAfter != 30*time.Second {
			t.Fatalf("January hit %d: %v %+v, want OK, %d used, 30s to the store's boundary", i+1,
				res.Outcome, b, i+1)
		}
	}
	res := hit(ahead)
	if res.Outcome != fleetstore.RateLimited || res.RetryAfter != 30*time.Second || res.Quota()[0].Used != 4 {
		t.Fatalf("the fifth in January, from the node ahead: %v %+v, want denied for 30s", res.Outcome,
			res.Quota())
	}
	if got := q.Resets(res.Quota()[0], ahead()); !got.Equal(end) {
		t.Errorf("the node ahead reads the reset at %v, want %v", got, end)
	}

	// 30s after it: both count in February, the node behind still in
	// January by its own clock.
	f.clock.advance(time.Minute)
	for i, node := range []func() time.Time{behind, ahead} {
		res := hit(node)
		if b := res.Quota()[0]; res.Outcome != fleetstore.OK || b.Used != int64(i+1) ||
			b.ResetAfter != 28*24*time.Hour-30*time.Second {
			t.Fatalf("February hit %d: %v %+v, want OK, %d used, to the end of February", i+1,
				res.Outcome, b, i+1)
		}
	}
	if got := q.Resets(fleetstore.Bucket{ResetAfter: 28*24*time.Hour - 30*time.Second}, behind()); !got.Equal(
		time.Date(2027, 3, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("the node behind reads the reset at %v, want 1 March", got)
	}
	// Two windows, January's and February's, each its own record, each
	// expiring at its end.
	recs := f.records("skew", "acme")
	want := map[string]time.Duration{
		"window/hooks_month/" + strconv.FormatInt(end.UnixMicro(), 10): 28*24*time.Hour - 30*time.Second,
	}
	if len(recs) != 1 || recs[0].TTL != want[recs[0].Key] {
		t.Errorf("records %+v, want %v (January's has ended)", recs, want)
	}
}

// TestWindowRecords: a window's count is a record of its own, expiring at
// the window's end, dropped from memory after it; Reset drops it at once.
func TestWindowRecords(t *testing.T) {
	f := newFixture(t)
	st := f.open(t, "rec?key_prefix=rec")
	at := time.UnixMicro(f.clock.now())
	e := calendar.Edges(calendar.Day, nil, at)
	q := fleetstore.MustLimit(fleetstore.NewQuota("hooks_day", 10, calendar.Day, nil))
	hit(t, st, []fleetstore.Charge{q.ChargeAt("acme", 3, at)}, nil)
	recs := f.records("rec", "acme")
	key := "window/hooks_day/" + strconv.FormatInt(e[1], 10)
	if len(recs) != 1 || recs[0].Key != key || recs[0].TTL != time.Duration(e[2]-f.clock.now())*time.Microsecond {
		t.Fatalf("records %+v, want %s expiring at the day's end", recs, key)
	}
	f.clock.set(e[2] - 1)
	if recs := f.records("rec", "acme"); len(recs) != 1 || recs[0].TTL != time.Microsecond {
		t.Fatalf("1µs before the end: %+v, want the record with 1µs left", recs)
	}
	f.clock.set(e[2])
	if recs := f.records("rec", "acme"); len(recs) != 0 {
		t.Fatalf("at the end: %+v, want none", recs)
	}
	// Charged in the next day, the store keeps that window only.
	next := time.UnixMicro(e[2])
	res := hit(t, st, []fleetstore.Charge{q.ChargeAt("acme", 1, next)}, nil)
	if res.Quota()[0].Used != 1 {
		t.Errorf("the next day: %+v, want 1 used", res.Quota())
	}
	if recs := f.records("rec", "acme"); len(recs) != 1 {
		t.Errorf("the next day: records %+v, want its window alone", recs)
	}
	if err := st.Reset(context.Background(), "acme"); err != nil {
		t.Fatal(err)
	}
	if recs := f.records("rec", "acme"); len(recs) != 0 {
		t.Errorf("after Reset: records %+v, want none", recs)
	}
	res = hit(t, st, []fleetstore.Charge{q.ChargeAt("acme", 1, next)}, nil)
	if res.Quota()[0].Used != 1 {
		t.Errorf("after Reset: %+v, want the count started over", res.Quota())
	}
}

// TestWindowBounded streams 20 000 fresh tenants, each charging a window
// of 10ms, while the injected clock advances 10µs per hit: about 1 000
// windows are live at any time. The store must sweep the ended ones, as
// it sweeps buckets: its size stays a small multiple of the live set.
func TestWindowBounded(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	st := f.open(t, "bounded?key_prefix=b")
	const (
		hits  = 20_000
		step  = 10 * time.Microsecond
		live  = 10 * time.Millisecond / step
		bound = 4*int(live) + 3*64*64 // as TestBounded's
	)
	for i := range hits {
		now := f.clock.now()
		c := fleetstore.Charge{Kind: "hooks_day", Tenant: "t" + strconv.Itoa(i),
			Window: driver.Window{Max: 5, Cost: 1, Edges: [4]int64{now - 10_000, now, now + 10_000, now + 20_000}}}
		hit(t, st, []fleetstore.Charge{c}, nil)
		f.clock.advance(step)
		if i%1000 == 999 {
			if b, _ := f.driver.Size("bounded", "b"); b > bound {
				t.Fatalf("after %d hits: %d window records held, want at most %d (about %d live)", i+1, b, bound, live)
			}
		}
	}
}
