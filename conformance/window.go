package conformance

import (
	"fmt"
	"sync"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/calendar"
	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/gcra"
)

// The clauses of calendar quotas (CONTRACT §3.2). The suite builds window
// charges itself, from the store's time: windows of a minute where the
// clause must not see a boundary, of a second or two where it waits for
// one.
func init() {
	register("Q1", "exactly max units conform in a window; the next is RateLimited "+
		"until the window's end", testQ1)
	register("Q2", "the count starts over at the window's end, by the store's clock, "+
		"whichever windows a node's clock sent", testQ2)
	register("Q3", "quotas and buckets are all-or-nothing both ways; "+
		"Duplicate and Pending count nothing", testQ3)
	register("Q4", "concurrent Hits from several Stores admit exactly max units of a window", testQ4)
	register("Q5", "a window's record expires at its end, within the expiry granularity; "+
		"Reset forgets it", testQ5)
	register("Q6", "Hit and Peek report a quota's used units, remaining units and reset", testQ6)
}

// windowsFrom returns the edges of three windows of length l (µs), the
// middle one starting at start.
func windowsFrom(start time.Time, l time.Duration) [4]int64 {
	s, n := start.UnixMicro(), l.Microseconds()
	return [4]int64{s - n, s, s + n, s + 2*n}
}

// shifted returns e, windows of one length, moved on by k windows: the
// windows a node sends whose clock is k windows ahead (k < 0: behind).
func shifted(e [4]int64, k int64) [4]int64 {
	n := e[1] - e[0]
	for i := range e {
		e[i] += k * n
	}
	return e
}

// window returns the charge of cost units against max in the windows e.
func window(kind fleetstore.Kind, tenant string, max, cost int64, e [4]int64) fleetstore.Charge {
	return fleetstore.Charge{Kind: kind, Tenant: tenant,
		Window: driver.Window{Max: max, Cost: cost, Edges: e}}
}

// wantWindow fails the clause unless b is the state of c's window with
// used units counted, its end at end, read by the store at a time since
// before, and denied as told.
func (t *clauseT) wantWindow(what string, b fleetstore.Bucket, c fleetstore.Charge, used int64,
	end, before time.Time, denied bool) {
	if b.Kind != c.Kind || b.Used != used || b.Headroom != 0 || b.Denied != denied {
		t.Errorf("%s: %s: used %d, denied %v, headroom %v; want %d used, denied %v, no headroom",
			what, b.Kind, b.Used, b.Denied, b.Headroom, used, denied)
	}
	t.within(what+": reset-after (the time to the window's end)", b.ResetAfter, end.Sub(t.now()),
		end.Sub(before))
}

// wantRetryToEnd fails the clause unless res waits until end, read by the
// store at a time since before: whole ms, rounded up (G2).
func (t *clauseT) wantRetryToEnd(what string, res fleetstore.Result, end, before time.Time) {
	t.within(what+": retry-after (the window's end)", res.RetryAfter,
		gcra.RetryAfter(end.Sub(t.now()).Microseconds()), gcra.RetryAfter(end.Sub(before).Microseconds()))
}

// testQ1: units conform while the window's count and the cost are at most
// max, whatever the costs; the next unit is denied until the window's
// end; a cost over max is ErrOverCapacity, nothing counted.
func testQ1(t *clauseT) {
	st := t.open()
	const max = 5
	before := t.now()
	e := windowsFrom(before.Add(-30*time.Second), time.Minute)
	end := time.UnixMicro(e[2])
	c := window("quota", t.tenant(), max, 1, e)
	for i := int64(1); i <= max; i++ {
		what := fmt.Sprintf("unit %d of %d", i, max)
		res := t.hit(st, []fleetstore.Charge{c}, nil)
		t.want(what, res, fleetstore.OK)
		t.wantWindow(what, res.Quota()[0], c, i, end, before, false)
	}
	res := t.hit(st, []fleetstore.Charge{c}, nil)
	t.want("a unit over max", res, fleetstore.RateLimited)
	t.wantWindow("a unit over max", res.Quota()[0], c, max, end, before, true)
	t.wantRetryToEnd("a unit over max", res, end, before)

	// Costs: max at once fills a fresh window; 3 + 3 of 5 does not fit,
	// and the denied 3 counts nothing: 2 more do.
	for _, step := range [][]struct {
		cost, used int64
		ok         bool
	}{
		{{max, max, true}, {1, max, false}},
		{{3, 3, true}, {3, 3, false}, {2, max, true}, {1, max, false}},
	} {
		tenant := t.tenant()
		for _, s := range step {
			c := window("quota", tenant, max, s.cost, e)
			what := fmt.Sprintf("a cost of %d at %d used", s.cost, s.used)
			res := t.hit(st, []fleetstore.Charge{c}, nil)
			if s.ok {
				t.want(what, res, fleetstore.OK)
			} else {
				t.want(what, res, fleetstore.RateLimited)
				t.wantRetryToEnd(what, res, end, before)
			}
			t.wantWindow(what, res.Quota()[0], c, s.used, end, before, !s.ok)
		}
	}

	// A cost over max never conforms (G6): an error, nothing counted.
	tenant := t.tenant()
	_, err := st.Hit(t.ctx(), []fleetstore.Charge{window("quota", tenant, max, max+1, e)}, nil)
	t.wantErr("a cost over max", err, fleetstore.ErrOverCapacity)
	res = t.hit(st, []fleetstore.Charge{window("quota", tenant, max, max, e)}, nil)
	t.want("max units after a cost over max", res, fleetstore.OK)
}

// q2Window is the length of Q2's windows: long enough for a loaded
// machine's calls, short enough to wait for two ends.
const q2Window = 2 * time.Second

// testQ2: nodes whose clocks are a window behind and ahead of the store's
// send three sets of windows; the store counts all their charges in the
// window holding its own clock, and in the next one once its clock has
// passed the end, from zero. On the wall clock an attempt a stall spoils
// is made again, up to three times.
func testQ2(t *clauseT) {
	st := t.open()
	for attempt := 1; ; attempt++ {
		late := t.q2Attempt(st)
		if !late || t.hasFailed() {
			return
		}
		if attempt == 3 {
			t.Fatalf("every attempt was stalled past its window's end: the machine is too loaded")
		}
		t.Logf("attempt %d stalled past its window's end: again", attempt)
	}
}

// q2Attempt runs Q2 once; late reports that a call came too close to a
// window's end to tell which window the store counted it in.
func (t *clauseT) q2Attempt(st *fleetstore.Store) (late bool) {
	const max = 3
	tenant := t.tenant()
	before := t.now()
	e := windowsFrom(before.Add(-100*time.Millisecond), q2Window)
	// margin keeps the wall clock's calls clear of an end; a clock the
	// suite moves lands exactly on it.
	margin := 200 * time.Millisecond
	if t.s.cfg.Clock != nil {
		margin = 0
	}
	fill := func(phase string, end time.Time, sets [3][4]int64) bool {
		for i, set := range sets {
			c := window("quota", tenant, max, 1, set)
			what := fmt.Sprintf("%s: a unit from the node %s", phase, [...]string{
				"behind", "on time", "ahead"}[i])
			// A store reading its own clock refuses the node behind's
			// windows once that clock has passed their end: an error
			// past the end is a late call, as a late answer is.
			res, err := st.Hit(t.ctx(), []fleetstore.Charge{c}, nil)
			if t.now().After(end.Add(-margin)) {
				return false
			}
			if err != nil {
				t.Fatalf("%s: unexpected error: %v", what, err)
			}
			t.want(what, res, fleetstore.OK)
			t.wantWindow(what, res.Quota()[0], c, int64(i+1), end, before, false)
		}
		c := window("quota", tenant, max, 1, sets[1])
		res := t.hit(st, []fleetstore.Charge{c}, nil)
		if t.now().After(end.Add(-margin)) {
			return false
		}
		t.want(phase+": a unit over max", res, fleetstore.RateLimited)
		t.wantWindow(phase+": a unit over max", res.Quota()[0], c, max, end, before, true)
		t.wantRetryToEnd(phase+": a unit over max", res, end, before)
		return true
	}
	// The store's window is [e1, e2): the node behind sees it as its
	// next, the one ahead as its last.
	end := time.UnixMicro(e[2])
	if !fill("before the end", end, [3][4]int64{shifted(e, -1), e, shifted(e, 1)}) {
		return true
	}
	if t.hasFailed() {
		return false
	}
	// The store's clock at the end, to the µs on a clock the suite moves:
	// [e2, e3) holds it, and counts from zero.
	t.sleep(end.Sub(t.now()) + margin/4)
	before = t.now()
	return !fill("after the end", time.UnixMicro(e[3]), [3][4]int64{e, shifted(e, 1), shifted(e, 2)})
}

// testQ3: a Hit denied by its quota takes nothing from its buckets, one
// denied by a bucket counts nothing in its quota, and the answers that
// charge nothing (Duplicate, Pending, the own retry) count nothing.
func testQ3(t *clauseT) {
	st := t.open()
	before := t.now()
	e := windowsFrom(before.Add(-30*time.Second), time.Minute)
	end := time.UnixMicro(e[2])

	// The quota denies: 2 of max 2 counted, the bucket (3 of a minute
	// each) keeps its third unit.
	tenant := t.tenant()
	b := charge(fleetstore.Hooks, tenant, time.Minute, 3*time.Minute)
	q := window("quota", tenant, 2, 1, e)
	for i := range 2 {
		t.want(fmt.Sprintf("bucket and quota, hit %d", i+1),
			t.hit(st, []fleetstore.Charge{b, q}, nil), fleetstore.OK)
	}
	res := t.hit(st, []fleetstore.Charge{b, q}, nil)
	t.want("bucket and quota, the quota full", res, fleetstore.RateLimited)
	if s := res.Quota(); len(s) == 2 && (s[0].Denied || !s[1].Denied) {
		t.Errorf("the quota full: denied bucket %v, quota %v; want the quota alone", s[0].Denied, s[1].Denied)
	}
	t.wantRetryToEnd("the quota full", res, end, before)
	t.want("the bucket alone after the quota denied (its third unit)",
		t.hit(st, []fleetstore.Charge{b}, nil), fleetstore.OK)
	t.want("the bucket alone, drained", t.hit(st, []fleetstore.Charge{b}, nil), fleetstore.RateLimited)

	// The bucket denies: the quota (max 3) keeps the two units it has left.
	tenant = t.tenant()
	b = charge(fleetstore.Hooks, tenant, time.Minute, time.Minute)
	q = window("quota", tenant, 3, 1, e)
	t.want("bucket and quota", t.hit(st, []fleetstore.Charge{b, q}, nil), fleetstore.OK)
	res = t.hit(st, []fleetstore.Charge{b, q}, nil)
	t.want("bucket and quota, the bucket drained", res, fleetstore.RateLimited)
	if s := res.Quota(); len(s) == 2 {
		t.wantWindow("the bucket drained", s[1], q, 1, end, before, false)
		if !s[0].Denied {
			t.Errorf("the bucket drained: the bucket is not marked denied")
		}
	}
	if res.RetryAfter > time.Minute || res.RetryAfter < 59*time.Second {
		t.Errorf("the bucket drained: retry-after %v, want the bucket's wait (about 1m)", res.RetryAfter)
	}
	q2 := q
	q2.Window.Cost = 2
	res = t.hit(st, []fleetstore.Charge{q2}, nil)
	t.want("the quota alone after the bucket denied (its two units left)", res, fleetstore.OK)
	t.wantWindow("the quota alone", res.Quota()[0], q2, 3, end, before, false)

	// Duplicate, Pending and the own retry count nothing.
	tenant = t.tenant()
	q = window("quota", tenant, 10, 1, e)
	claim := t.claimFor(tenant, "hook-a")
	t.want("the first hit", t.hit(st, []fleetstore.Charge{q}, &claim), fleetstore.OK)
	check := func(what string, res fleetstore.Result, o fleetstore.Outcome) {
		t.want(what, res, o)
		if s := res.Quota(); len(s) == 1 {
			t.wantWindow(what+" (counted once, by the first hit)", s[0], q, 1, end, before, false)
		}
	}
	check("the own retry", t.hit(st, []fleetstore.Charge{q}, &claim), fleetstore.OK)
	check("another hook while pending", t.hit(st, []fleetstore.Charge{q}, other(claim, "hook-b")),
		fleetstore.Pending)
	t.commit(st, claim)
	check("another hook once committed", t.hit(st, []fleetstore.Charge{q}, other(claim, "hook-c")),
		fleetstore.Duplicate)
	res = t.hit(st, []fleetstore.Charge{q}, nil)
	t.want("the quota alone", res, fleetstore.OK)
	t.wantWindow("the quota alone after them", res.Quota()[0], q, 2, end, before, false)
}

// testQ4: 200 Hits at once over several Stores on a window of max 50:
// exactly 50 are admitted, and the count reported never passes max.
func testQ4(t *clauseT) {
	const max, callers = 50, 200
	e := windowsFrom(t.now().Add(-time.Minute), 2*time.Minute)
	c := window("quota", t.tenant(), max, 1, e)
	var mu sync.Mutex
	seen := map[int64]bool{} // the counts the admitted Hits reported
	stores, admitted, limited := t.race(c, callers, func(res fleetstore.Result) {
		mu.Lock()
		seen[res.Quota()[0].Used] = true
		mu.Unlock()
	})
	if admitted != max || limited != callers-max {
		t.Fatalf("%d concurrent Hits over %d stores on a window of max %d: %d admitted, %d limited",
			callers, stores, max, admitted, limited)
	}
	for used := int64(1); used <= max; used++ {
		if !seen[used] {
			t.Errorf("no admitted Hit reported %d used: each of the %d counts 1 to %d once", used, max, max)
			break
		}
	}
}

// testQ5: Reset forgets a tenant's windows; a window's count is a record
// that expires at the window's end (rounded up to the expiry
// granularity), and is gone after it. Without Config.Records, the
// records' expiry is not seen.
func testQ5(t *clauseT) {
	st := t.open()
	tenant := t.tenant()
	before := t.now()
	e := windowsFrom(before.Add(-30*time.Second), time.Minute)
	c := window("quota", tenant, 2, 2, e)
	t.want("a window filled", t.hit(st, []fleetstore.Charge{c}, nil), fleetstore.OK)
	if err := st.Reset(t.ctx(), tenant); err != nil {
		t.Fatalf("reset: %v", err)
	}
	res := t.hit(st, []fleetstore.Charge{c}, nil)
	t.want("the window filled again after Reset", res, fleetstore.OK)
	t.wantWindow("after Reset", res.Quota()[0], c, 2, time.UnixMicro(e[2]), before, false)
	if t.s.cfg.Records == nil {
		t.Logf("Config.Records is not set: the records' expiry is not seen")
		return
	}
	t.q5Records(st)
}

// q5Records: a window's record expires at its end.
func (t *clauseT) q5Records(st *fleetstore.Store) {
	gran := t.s.cfg.Granularity
	const length = time.Second
	for attempt := 1; ; attempt++ {
		tenant := t.tenant()
		before := t.now()
		e := windowsFrom(before.Add(-100*time.Millisecond), length)
		end := time.UnixMicro(e[2])
		t.want("a unit", t.hit(st, []fleetstore.Charge{window("quota", tenant, 5, 1, e)}, nil),
			fleetstore.OK)
		recs := t.records(tenant)
		if !t.now().Before(end) {
			// A stall: the count may have gone to the next window.
			if attempt == 3 {
				t.Fatalf("every attempt's count and read outlasted its window of %v", length)
			}
			t.Logf("attempt %d: the count and the read outlasted the window: again", attempt)
			continue
		}
		if len(recs) == 0 {
			t.Fatalf("no record for a window counted in, %v before its end", end.Sub(t.now()))
		}
		for _, r := range recs {
			if r.TTL < 0 {
				t.Errorf("record %q has no expiry", r.Key)
			} else if r.TTL > end.Sub(before)+gran {
				t.Errorf("record %q expires in %v: its window ends in at most %v, granularity %v", r.Key,
					r.TTL, end.Sub(before), gran)
			}
		}
		wait := end.Sub(t.now()) + gran + 100*time.Millisecond
		t.sleep(wait)
		if recs := t.records(tenant); len(recs) > 0 {
			t.Errorf("records left %v after their window's end: %v", gran+100*time.Millisecond, recs)
		}
		return
	}
}

// q6Limits are Q6's: a monthly quota in UTC beside a rate limit of hours
// an increment.
var q6Limits = struct{ hooks, month fleetstore.Limit }{
	hooks: fleetstore.MustLimit(fleetstore.NewLimit(fleetstore.Hooks, 1, time.Hour, 5)),
	month: fleetstore.MustLimit(fleetstore.NewQuota("hooks_month", 10, calendar.Month, nil)),
}

// testQ6: a monthly quota's Hit and Peek report the month's count, the
// units left (Limit.Remaining) and the reset (Limit.Resets: the month's
// end); a Peek counts nothing, and one when the month is used up answers
// RateLimited until its end. The month is this node's (Peek reads the
// node's clock): a clause that runs across a month's end runs again.
func testQ6(t *clauseT) {
	for attempt := 1; ; attempt++ {
		start, _ := calendar.Window(calendar.Month, time.UTC, t.now())
		t.q6Attempt()
		if s, _ := calendar.Window(calendar.Month, time.UTC, t.now()); s.Equal(start) || t.hasFailed() {
			return
		}
		if attempt == 2 {
			t.Fatalf("the clause ran across a month's end twice")
		}
		t.Logf("attempt %d ran across a month's end: again", attempt)
	}
}

func (t *clauseT) q6Attempt() {
	st := t.open()
	l := q6Limits
	tenant := t.tenant()
	before := t.now()
	_, end := calendar.Window(calendar.Month, time.UTC, before)
	check := func(what string, res fleetstore.Result, used int64, denied bool) {
		s := res.Quota()
		if len(s) != 2 {
			t.Fatalf("%s: %d bucket states, want 2", what, len(s))
		}
		c := l.month.ChargeAt(tenant, 1, before)
		t.wantWindow(what, s[1], c, used, end, before, denied)
		if got := l.month.Remaining(s[1]); got != max(10-used, 0) {
			t.Errorf("%s: remaining %d, want %d", what, got, 10-used)
		}
		if got := l.month.Resets(s[1], t.now()); !got.Equal(end) {
			t.Errorf("%s: resets at %v, want the month's end %v", what, got, end)
		}
		if s[0].Denied || s[0].Kind != fleetstore.Hooks {
			t.Errorf("%s: the rate limit's bucket %+v, want hooks, not denied", what, s[0])
		}
	}
	peek := func(what string, used int64, o fleetstore.Outcome) {
		if !t.s.peeks {
			return
		}
		res, err := st.Peek(t.ctx(), tenant, l.hooks, l.month)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		t.want(what, res, o)
		check(what, res, used, o == fleetstore.RateLimited)
		if o == fleetstore.RateLimited {
			t.wantRetryToEnd(what, res, end, before)
		}
	}
	hit := func(what string, cost, used int64, o fleetstore.Outcome) {
		charges := []fleetstore.Charge{l.hooks.Charge(tenant, 1), l.month.ChargeAt(tenant, cost, t.now())}
		res := t.hit(st, charges, nil)
		t.want(what, res, o)
		check(what, res, used, o == fleetstore.RateLimited)
		if o == fleetstore.RateLimited {
			t.wantRetryToEnd(what, res, end, before)
		}
	}
	if !t.s.peeks {
		t.Logf("the driver cannot Peek (no driver.Peeker): Hits only")
	}
	peek("a Peek of a fresh tenant", 0, fleetstore.OK)
	hit("a Hit of 4", 4, 4, fleetstore.OK)
	peek("a Peek after it", 4, fleetstore.OK)
	peek("a second Peek (the first counted nothing)", 4, fleetstore.OK)
	hit("a Hit of 6", 6, 10, fleetstore.OK)
	peek("a Peek of a month used up", 10, fleetstore.RateLimited)
	hit("a Hit of 1 more", 1, 10, fleetstore.RateLimited)
}
