package fleetstore_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	_ "time/tzdata"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/calendar"
	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/drivers/memory"
)

func berlin(t testing.TB) *time.Location {
	loc, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// TestNewQuotaErrors: each bad argument is ErrInvalid naming it.
func TestNewQuotaErrors(t *testing.T) {
	for _, tt := range []struct {
		field string
		build func() (fleetstore.Limit, error)
	}{
		{"kind", func() (fleetstore.Limit, error) { return fleetstore.NewQuota("Hooks", 10, calendar.Month, nil) }},
		{"n", func() (fleetstore.Limit, error) { return fleetstore.NewQuota("hooks_month", 0, calendar.Month, nil) }},
		{"n", func() (fleetstore.Limit, error) {
			return fleetstore.NewQuota("hooks_month", fleetstore.MaxQuota+1, calendar.Month, nil)
		}},
		{"period", func() (fleetstore.Limit, error) { return fleetstore.NewQuota("hooks_month", 10, 0, nil) }},
		{"period", func() (fleetstore.Limit, error) { return fleetstore.NewQuota("hooks_month", 10, 4, nil) }},
		{"bytes", func() (fleetstore.Limit, error) { return fleetstore.NewByteQuota("bytes_month", -1, calendar.Day, nil) }},
	} {
		l, err := tt.build()
		var inv *fleetstore.InvalidError
		if !errors.As(err, &inv) || inv.Field != tt.field || !errors.Is(err, fleetstore.ErrInvalid) {
			t.Errorf("%s: %v, %v; want ErrInvalid naming %q", tt.field, l, err, tt.field)
		}
	}
}

// TestQuotaLimit: a quota's accessors, its charge at an injected clock,
// and its remaining units.
func TestQuotaLimit(t *testing.T) {
	loc := berlin(t)
	q, err := fleetstore.NewQuota("hooks_month", 10_000, calendar.Month, loc)
	if err != nil {
		t.Fatal(err)
	}
	if !q.IsQuota() || q.Period() != calendar.Month || q.Location() != loc || q.Burst() != 10_000 ||
		q.Capacity() != 0 || q.InBytes() || q.IsShadow() || q.Kind() != "hooks_month" {
		t.Errorf("quota accessors: %v %v %v %v %v %v", q.IsQuota(), q.Period(), q.Location(), q.Burst(),
			q.Capacity(), q.InBytes())
	}
	if got, want := q.String(), "hooks_month: 10000 per month (Europe/Berlin)"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	rate := fleetstore.MustLimit(fleetstore.PerSecond(fleetstore.Hooks, 10, 10))
	if rate.IsQuota() || rate.Period() != 0 || rate.Location() != nil {
		t.Errorf("a rate limit reads as a quota: %v %v %v", rate.IsQuota(), rate.Period(), rate.Location())
	}

	now := time.Date(2026, 2, 14, 9, 30, 0, 0, loc)
	c := q.ChargeAt("acme", 3, now)
	want := fleetstore.Charge{Kind: "hooks_month", Tenant: "acme", Window: driver.Window{Max: 10_000, Cost: 3,
		Edges: calendar.Edges(calendar.Month, loc, now)}}
	if c != want || !c.IsWindow() {
		t.Errorf("ChargeAt = %+v, want %+v", c, want)
	}
	if c := q.ChargeAt("acme", 0, now); c.Window.Cost != 1 {
		t.Errorf("a cost of 0 is charged %d, want 1", c.Window.Cost)
	}
	if c := q.ChargeAt("acme", 1<<62, now); c.Window.Cost != fleetstore.MaxQuota+1 {
		t.Errorf("a cost of 2^62 is charged %d, want MaxQuota+1 (over every quota)", c.Window.Cost)
	}
	if c := q.Shadow().ChargeAt("acme", 1, now); !c.Shadow || !q.Shadow().IsQuota() {
		t.Errorf("a shadow quota's charge is not shadow: %+v", c)
	}
	if c := q.Charge("acme", 1); c.Window.Edges[1] > time.Now().UnixMicro() ||
		c.Window.Edges[2] <= time.Now().UnixMicro() {
		t.Errorf("Charge's window %v does not hold time.Now", c.Window.Edges)
	}
	for used, want := range map[int64]int64{0: 10_000, 9_999: 1, 10_000: 0, 12_000: 0} {
		if got := q.Remaining(fleetstore.Bucket{Used: used}); got != want {
			t.Errorf("Remaining with %d used = %d, want %d", used, got, want)
		}
	}
	b, _ := fleetstore.NewByteQuota("bytes_day", 1<<30, calendar.Day, nil)
	if !b.InBytes() || b.Location() != time.UTC ||
		b.String() != "bytes_day: 1073741824 bytes per day (UTC)" {
		t.Errorf("byte quota: %v %v %q", b.InBytes(), b.Location(), b.String())
	}
}

// TestQuotaResets: the reset instant is the calendar boundary, exact,
// whether the store's clock is ahead of this node's or behind it.
func TestQuotaResets(t *testing.T) {
	loc := berlin(t)
	q, _ := fleetstore.NewQuota("hooks_month", 10, calendar.Month, loc)
	end := time.Date(2026, 3, 1, 0, 0, 0, 0, loc)
	now := end.Add(-30 * time.Second)
	for _, skew := range []time.Duration{0, 5 * time.Second, -time.Minute, 1500 * time.Microsecond} {
		b := fleetstore.Bucket{ResetAfter: 30*time.Second - skew} // the store's now is now + skew
		if got := q.Resets(b, now); !got.Equal(end) {
			t.Errorf("skew %v: Resets = %v, want %v", skew, got, end)
		}
	}
	rate := fleetstore.MustLimit(fleetstore.PerSecond(fleetstore.Hooks, 1, 10))
	if got := rate.Resets(fleetstore.Bucket{ResetAfter: 3 * time.Second}, now); !got.Equal(now.Add(3 * time.Second)) {
		t.Errorf("a rate limit's Resets = %v, want now + 3s", got)
	}
}

// TestPlanQuota: a plan may hold quotas beside rate limits, each kind once.
func TestPlanQuota(t *testing.T) {
	perSecond := fleetstore.MustLimit(fleetstore.PerSecond(fleetstore.Hooks, 10, 10))
	perMonth := fleetstore.MustLimit(fleetstore.NewQuota("hooks_month", 10_000, calendar.Month, nil))
	if err := (fleetstore.Plan{perSecond, perMonth, perMonth.Shadow()}).Check(); err == nil ||
		!strings.Contains(err.Error(), "plan[2]") {
		t.Errorf("a kind twice: %v, want an error naming plan[2]", err)
	}
	p := fleetstore.Plan{perSecond, perMonth}
	if err := p.Check(); err != nil {
		t.Fatalf("Plan{perSecond, perMonth}.Check() = %v", err)
	}
	charges := p.Charges(nil, "acme", 512)
	if len(charges) != 2 || charges[0].IsWindow() || !charges[1].IsWindow() || charges[1].Window.Cost != 1 {
		t.Errorf("Charges = %+v, want a GCRA charge and a window charge of 1", charges)
	}
}

// TestInvalidWindow: a bad window charge is ErrInvalid naming its field,
// or ErrOverCapacity for a cost over max, and reaches no driver.
func TestInvalidWindow(t *testing.T) {
	t.Parallel()
	conn := &fakeConn{}
	st := openFake(t, conn)
	good := fleetstore.MustLimit(fleetstore.NewQuota("hooks_month", 10, calendar.Month, nil)).Charge("acme", 1)
	with := func(f func(*fleetstore.Charge)) fleetstore.Charge { c := good; f(&c); return c }
	for _, tt := range []struct {
		field string // "" for ErrOverCapacity
		c     fleetstore.Charge
	}{
		{"charges[0].window.max", with(func(c *fleetstore.Charge) { c.Window.Max = -1 })},
		{"charges[0].window.max", with(func(c *fleetstore.Charge) { c.Window.Max = driver.MaxWindowUnits + 1 })},
		{"charges[0].window.cost", with(func(c *fleetstore.Charge) { c.Window.Cost = 0 })},
		{"charges[0].window.edges", with(func(c *fleetstore.Charge) { c.Window.Edges[2] = c.Window.Edges[1] })},
		{"charges[0].window.edges", with(func(c *fleetstore.Charge) { c.Window.Edges = [4]int64{} })},
		{"charges[0].window.edges", with(func(c *fleetstore.Charge) { c.Window.Edges[0] = -1 })},
		{"charges[0].window.edges", with(func(c *fleetstore.Charge) {
			c.Window.Edges = [4]int64{1, 2, 3, 3 + 367*24*3600*1_000_000}
		})},
		{"charges[0].window.edges", with(func(c *fleetstore.Charge) {
			c.Window.Edges = [4]int64{1, 1<<62 + 1, -1 << 62, 3}
		})},
		{"charges[0].increment", with(func(c *fleetstore.Charge) { c.Increment = time.Second })},
		{"charges[0].increment", with(func(c *fleetstore.Charge) { c.Capacity = time.Second })},
		{"", with(func(c *fleetstore.Charge) { c.Window.Cost = 11 })},
	} {
		_, err := st.Hit(context.Background(), []fleetstore.Charge{tt.c}, nil)
		var inv *fleetstore.InvalidError
		switch {
		case tt.field == "" && !errors.Is(err, fleetstore.ErrOverCapacity):
			t.Errorf("%+v: %v, want ErrOverCapacity", tt.c.Window, err)
		case tt.field != "" && (!errors.As(err, &inv) || inv.Field != tt.field):
			t.Errorf("%+v: %v, want ErrInvalid naming %s", tt.c.Window, err, tt.field)
		}
	}
	if n := conn.calls.Load(); n != 0 {
		t.Errorf("%d driver calls with bad window charges, want none", n)
	}
}

// TestInvalidWindowResult: a driver's report of a window charge that
// cannot be true is ErrUnavailable, never a decision.
func TestInvalidWindowResult(t *testing.T) {
	t.Parallel()
	q := fleetstore.MustLimit(fleetstore.NewQuota("hooks_day", 10, calendar.Day, nil))
	c := q.Charge("acme", 2)
	day := 24 * time.Hour
	state := func(o driver.Outcome, retry time.Duration, used int64, reset time.Duration) driver.Result {
		r := driver.Result{Outcome: o, RetryAfter: retry, NBuckets: 1}
		r.Buckets[0] = driver.Bucket{Used: used, ResetAfter: reset}
		return r
	}
	for _, tt := range []struct {
		name    string
		give    driver.Result
		wantErr bool
	}{
		{"ok", state(driver.OK, 0, 2, time.Hour), false},
		{"denied, waits to the end", state(driver.RateLimited, time.Hour+time.Millisecond, 9, time.Hour+500*time.Microsecond), false},
		{"negative count", state(driver.OK, 0, -1, time.Hour), true},
		{"count over 2^50", state(driver.OK, 0, driver.MaxWindowUnits+1, time.Hour), true},
		{"no reset-after", state(driver.OK, 0, 2, 0), true},
		{"reset-after past any window", state(driver.OK, 0, 2, day+2*time.Hour), true},
		{"reset-after not whole µs", state(driver.OK, 0, 2, time.Hour+time.Nanosecond), true},
		{"denied with room", state(driver.RateLimited, time.Hour, 8, time.Hour), true},
		{"denied, another wait", state(driver.RateLimited, time.Second, 9, time.Hour), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st := openFake(t, &fakeConn{hit: func(context.Context, []driver.Charge, *driver.Claim) (driver.Result, error) {
				return tt.give, nil
			}})
			res, err := st.Hit(context.Background(), []fleetstore.Charge{c}, nil)
			if tt.wantErr {
				if !errors.Is(err, fleetstore.ErrUnavailable) {
					t.Fatalf("Hit = %+v, %v; want ErrUnavailable", res, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			b := res.Quota()[0]
			if b.Kind != "hooks_day" || b.Headroom != 0 || b.Denied != (res.Outcome == fleetstore.RateLimited) {
				t.Errorf("bucket %+v of %v", b, res.Outcome)
			}
		})
	}
	// A GCRA charge's state has no count.
	st := openFake(t, &fakeConn{hit: func(context.Context, []driver.Charge, *driver.Claim) (driver.Result, error) {
		return state(driver.OK, 0, 1, time.Second), nil
	}})
	if _, err := st.Hit(context.Background(), []fleetstore.Charge{testCharge}, nil); !errors.Is(err, fleetstore.ErrUnavailable) {
		t.Errorf("a count on a GCRA charge: %v, want ErrUnavailable", err)
	}
}

// quotaStore opens a memory store whose clock is *now (µs), the node's
// clock being the test's own.
func quotaStore(t *testing.T, now *atomic.Int64) *fleetstore.Store {
	t.Helper()
	st, err := fleetstore.OpenDriver(memory.New(now.Load), "memory://")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// TestPlanWithQuota: a per-second limit and a daily quota in one Hit, on
// the memory driver: the quota admits n a day, denies the next with the
// time to midnight, and takes nothing from the per-second bucket when it
// denies; a Peek reads it; the count starts over at midnight.
func TestPlanWithQuota(t *testing.T) {
	t.Parallel()
	loc := berlin(t)
	midnight := time.Date(2026, 10, 26, 0, 0, 0, 0, loc) // after a 25-hour day
	var now atomic.Int64
	now.Store(midnight.Add(-time.Hour).UnixMicro())
	st := quotaStore(t, &now)
	perSecond := fleetstore.MustLimit(fleetstore.PerSecond(fleetstore.Hooks, 10, 10))
	perDay := fleetstore.MustLimit(fleetstore.NewQuota("hooks_day", 3, calendar.Day, loc))
	plan := fleetstore.Plan{perSecond, perDay}
	ctx := context.Background()
	if err := plan.Check(); err != nil {
		t.Fatal(err)
	}
	// The node's clock is a second behind the store's: the windows it
	// sends hold the store's now too.
	node := func() time.Time { return time.UnixMicro(now.Load()).Add(-time.Second) }
	hit := func() fleetstore.Result {
		t.Helper()
		charges := []fleetstore.Charge{perSecond.Charge("acme", 1), perDay.ChargeAt("acme", 1, node())}
		res, err := st.Hit(ctx, charges, nil)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	for i := range 3 {
		res := hit()
		q := res.Quota()
		if res.Outcome != fleetstore.OK || q[1].Used != int64(i+1) || perDay.Remaining(q[1]) != int64(2-i) ||
			q[1].ResetAfter != time.Hour {
			t.Fatalf("hit %d: %v %+v, want OK with %d used, reset in 1h", i+1, res.Outcome, q, i+1)
		}
	}
	res := hit()
	q := res.Quota()
	if res.Outcome != fleetstore.RateLimited || res.RetryAfter != time.Hour || !q[1].Denied || q[0].Denied ||
		q[1].Used != 3 {
		t.Fatalf("hit 4: %v retry %v %+v, want RateLimited by hooks_day, retry 1h", res.Outcome, res.RetryAfter, q)
	}
	if q[0].ResetAfter != 300*time.Millisecond {
		t.Errorf("hit 4: the per-second bucket reset-after %v, want 300ms (nothing taken)", q[0].ResetAfter)
	}
	if got := perDay.Resets(q[1], node()); !got.Equal(midnight) {
		t.Errorf("Resets = %v, want %v", got, midnight)
	}
	fleetstore.SetNow(st, node) // Peek's node clock
	p, err := st.Peek(ctx, "acme", perSecond, perDay)
	if err != nil || p.Outcome != fleetstore.RateLimited || p.Quota()[1].Used != 3 || !p.Quota()[1].Denied {
		t.Fatalf("Peek = %+v, %v; want RateLimited with 3 used", p, err)
	}
	now.Add(time.Hour.Microseconds()) // midnight: the count starts over
	res = hit()
	if res.Outcome != fleetstore.OK || res.Quota()[1].Used != 1 || res.Quota()[1].ResetAfter != 24*time.Hour {
		t.Fatalf("after midnight: %v %+v, want OK with 1 used, reset in 24h", res.Outcome, res.Quota())
	}
}

// TestShadowQuota: a shadow quota never denies, counts every charge, and
// reports Denied once its count is over n.
func TestShadowQuota(t *testing.T) {
	t.Parallel()
	var now atomic.Int64
	now.Store(time.Date(2026, 5, 5, 12, 0, 0, 0, time.UTC).UnixMicro())
	st := quotaStore(t, &now)
	q := fleetstore.MustLimit(fleetstore.NewQuota("hooks_month", 2, calendar.Month, nil)).Shadow()
	at := time.UnixMicro(now.Load())
	for i, denied := range []bool{false, false, true, true} {
		res, err := st.Hit(context.Background(), []fleetstore.Charge{q.ChargeAt("acme", 1, at)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		b := res.Quota()[0]
		if res.Outcome != fleetstore.OK || b.Used != int64(i+1) || !b.Shadow || b.Denied != denied {
			t.Errorf("hit %d: %v %+v, want OK, %d used, shadow, denied %v", i+1, res.Outcome, b, i+1, denied)
		}
	}
	// A cost over n is no ErrOverCapacity for a shadow quota.
	res, err := st.Hit(context.Background(), []fleetstore.Charge{q.ChargeAt("acme", 5, at)}, nil)
	if err != nil || res.Outcome != fleetstore.OK || !res.Quota()[0].Denied {
		t.Errorf("a shadow charge over n: %+v, %v; want OK, denied", res, err)
	}
}

// TestQuotaOutsideWindows: windows sent by a node whose clock is off by
// more than a window hold not the store's clock: an error, nothing
// counted.
func TestQuotaOutsideWindows(t *testing.T) {
	t.Parallel()
	var now atomic.Int64
	now.Store(time.Date(2026, 5, 5, 12, 0, 0, 0, time.UTC).UnixMicro())
	st := quotaStore(t, &now)
	fleetstore.SetNow(st, func() time.Time { return time.UnixMicro(now.Load()) }) // Peek's node clock
	q := fleetstore.MustLimit(fleetstore.NewQuota("hooks_day", 2, calendar.Day, nil))
	far := time.UnixMicro(now.Load()).Add(72 * time.Hour)
	_, err := st.Hit(context.Background(), []fleetstore.Charge{q.ChargeAt("acme", 1, far)}, nil)
	if !errors.Is(err, fleetstore.ErrUnavailable) || !strings.Contains(err.Error(), "outside the windows") {
		t.Fatalf("a node 3 days ahead: %v, want ErrUnavailable saying the clock is outside the windows", err)
	}
	p, err := st.Peek(context.Background(), "acme", q)
	if err != nil || p.Quota()[0].Used != 0 {
		t.Errorf("Peek after it: %+v, %v; want nothing counted", p, err)
	}
}

// TestQuotaChargeAllocs: a quota's charge, its calendar edges included,
// allocates nothing, in any zone (G10: a Hit's hot path).
func TestQuotaChargeAllocs(t *testing.T) {
	for _, loc := range []*time.Location{time.UTC, berlin(t)} {
		q := fleetstore.MustLimit(fleetstore.NewQuota("hooks_month", 10_000, calendar.Month, loc))
		if n := testing.AllocsPerRun(100, func() { _ = q.Charge("acme", 1) }); n != 0 {
			t.Errorf("%v: Charge allocates %v times, want 0", loc, n)
		}
	}
}

// BenchmarkQuotaCharge: the charge of a monthly quota in a zone with
// summer time, built per Hit (its calendar edges from time.Now).
func BenchmarkQuotaCharge(b *testing.B) {
	q := fleetstore.MustLimit(fleetstore.NewQuota("hooks_month", 10_000, calendar.Month, berlin(b)))
	b.ReportAllocs()
	for b.Loop() {
		_ = q.Charge("acme", 1)
	}
}

// TestQuotaLocal: a Hit with a quota that the fallback decides locally
// (CONTRACT §8) is answered, marked local, its window's state reported:
// the degraded mode takes window charges.
func TestQuotaLocal(t *testing.T) {
	t.Parallel()
	d := newFlaky()
	d.set(refused)
	st := openOnFlaky(t, d, "quota-local", fleetstore.Fallback{Nodes: 4})
	q := fleetstore.MustLimit(fleetstore.NewQuota("hooks_month", 100, calendar.Month, nil))
	res, err := st.Hit(context.Background(), []fleetstore.Charge{q.Charge("acme", 1)}, nil)
	if err != nil || !res.Local || res.Outcome != fleetstore.OK {
		t.Fatalf("a quota's Hit while the store is out: %+v, %v; want a local OK", res, err)
	}
	if b := res.Quota()[0]; b.Kind != "hooks_month" || b.Used != 1 || b.ResetAfter <= 0 {
		t.Errorf("its window: %+v, want 1 used and a reset-after", b)
	}
}
