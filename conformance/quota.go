package conformance

import (
	"fmt"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/gcra"
)

func init() {
	register("G10", "every Hit reports each charged bucket's reset-after and headroom, in order; "+
		"RateLimited names the kinds that denied it", testG10)
}

// throttledScales are the increments of the attempts at G10's timed
// table, one after another: the table is throttled's in units of its
// increment (GCRA is the same at any scale: every remaining count, and
// every time over the increment, is the table's), run first at 250ms an
// increment (2.4s of the store's time instead of 9.5s) and, when a
// stalled machine spoils that attempt, at throttled's own 1s. A row may
// be called at most 0.3 increment late (75ms, then 300ms) before its
// attempt is abandoned: a remaining count is exact only while the calls
// keep to the table's times (row 8's headroom is 0.9 increment short of
// one more, row 11 needs row 10 no more than 0.5 later than itself).
var throttledScales = []time.Duration{250 * time.Millisecond, time.Second, time.Second}

// stallLimit is how late a row may be called at increment inc.
func stallLimit(inc time.Duration) time.Duration { return inc * 3 / 10 }

func testG10(t *clauseT) {
	t.throttledTable()
	t.quotaInOrder()
	t.quotaUncharged()
}

// quotaRow is one row of throttled's table: a Hit of cost increments at a
// time after the start, and what it must answer.
type quotaRow struct {
	row       int
	at        time.Duration
	cost      int64
	remaining int64
	reset     time.Duration
	retry     time.Duration // 0: OK
}

// throttledRows is the golden table of throttled's GCRA
// (github.com/throttled/throttled/v2, rate_test.go, TestRateLimit): limit
// 5 = burst 4 + 1 at 1 per second, increment 1s and capacity 5s, as
// throttled publishes it; throttledAttempt scales its times to the
// attempt's increment.
// Row 0 (a request over the burst) is G6's ErrOverCapacity and row 12 (a
// zero-cost peek) has no counterpart (increments are ≥ 1µs); the others
// are kept with their numbers. package gcra's TestQuotaThrottledTable
// checks the same rows against the reference.
var throttledRows = []quotaRow{
	{1, 0, 1, 4, 1 * time.Second, 0},
	{2, 0, 1, 3, 2 * time.Second, 0},
	{3, 0, 1, 2, 3 * time.Second, 0},
	{4, 0, 1, 1, 4 * time.Second, 0},
	{5, 0, 1, 0, 5 * time.Second, 0},
	{6, 0, 1, 0, 5 * time.Second, time.Second},
	{7, 3000 * time.Millisecond, 1, 2, 3 * time.Second, 0},
	{8, 3100 * time.Millisecond, 1, 1, 3900 * time.Millisecond, 0},
	{9, 4000 * time.Millisecond, 1, 1, 4 * time.Second, 0},
	{10, 8000 * time.Millisecond, 1, 4, 1 * time.Second, 0},
	{11, 9500 * time.Millisecond, 1, 4, 1 * time.Second, 0},
	{13, 9500 * time.Millisecond, 2, 2, 3 * time.Second, 0},
	{14, 9500 * time.Millisecond, 5, 2, 3 * time.Second, 3 * time.Second},
}

// throttledTable runs throttledRows on one bucket, at each of
// throttledScales until an attempt completes. Remaining (the headroom in
// whole increments, rounded down) must be the table's exactly; on the
// wall clock the reset-after may be short of the table's, and the
// headroom over it, by how late the rows were called. A row called more
// than stallLimit late abandons the attempt for a fresh bucket.
func (t *clauseT) throttledTable() {
	st := t.open()
	var late time.Duration
	for _, inc := range throttledScales {
		var ok bool
		if late, ok = t.throttledAttempt(st, inc); ok {
			return
		}
	}
	t.Logf("throttled's table: every attempt was called up to %v late (a stalled machine): "+
		"checked rows 1–6 only", late)
}

// scaleRow is d of throttled's table (increment 1s) at increment inc, in
// whole ms first: d × inc in ns overflows int64 past 9.2s × 1s.
func scaleRow(d, inc time.Duration) time.Duration { return d / time.Millisecond * inc / 1000 }

// throttledAttempt runs the table once at increment inc (capacity 5 ×
// inc); ok is false when it was abandoned, late how late its latest row
// was.
func (t *clauseT) throttledAttempt(st *fleetstore.Store, inc time.Duration) (
	late time.Duration, ok bool) {
	scale := func(d time.Duration) time.Duration { return scaleRow(d, inc) }
	capacity := 5 * inc
	tenant := t.tenant()
	// The store's now of row 1 is between before and start: a row slept
	// to start + at is never early, and is at most since(before) − at
	// late.
	before := t.now()
	var start time.Time
	for _, r := range throttledRows {
		at, reset, retry := scale(r.at), scale(r.reset), scale(r.retry)
		if r.row > 1 {
			if wait := at - t.since(start); wait > 0 {
				t.sleep(wait)
			}
		}
		c := charge(fleetstore.Hooks, tenant, time.Duration(r.cost)*inc, capacity)
		res := t.hit(st, []fleetstore.Charge{c}, nil)
		if r.row == 1 {
			start = t.now()
		}
		late = max(late, t.since(before)-at)
		if late > stallLimit(inc) {
			return late, false
		}
		what := fmt.Sprintf("throttled's row %d (cost %d at +%v, increment %v)", r.row, r.cost, at, inc)
		if retry == 0 {
			t.want(what, res, fleetstore.OK)
		} else {
			t.want(what, res, fleetstore.RateLimited)
			t.within(what+": retry-after", res.RetryAfter, gcra.RetryAfter((retry - late).Microseconds()),
				gcra.RetryAfter(retry.Microseconds()))
		}
		q := t.quota(what, res, c)
		if len(q) == 0 {
			return late, true
		}
		b := q[0]
		if got := int64(b.Headroom / inc); got != r.remaining {
			t.Errorf("%s: remaining %d (headroom %v of capacity %v), want %d", what, got, b.Headroom,
				capacity, r.remaining)
		}
		t.within(what+": reset-after", b.ResetAfter, reset-late, reset)
		t.within(what+": headroom", b.Headroom, capacity-reset, capacity-reset+late)
		if b.Denied != (retry != 0) {
			t.Errorf("%s: denied %v, want %v", what, b.Denied, retry != 0)
		}
		if t.hasFailed() {
			return late, true // the later rows follow from this one: one row's report is enough
		}
	}
	return late, true
}

// quota returns res's bucket states and fails the clause unless there is
// one per charge, of its kind, with headroom + reset-after = capacity
// (each bucket's lead is at most its capacity here).
func (t *clauseT) quota(what string, res fleetstore.Result,
	charges ...fleetstore.Charge) []fleetstore.Bucket {
	q := res.Quota()
	if len(q) != len(charges) {
		t.Errorf("%s: %d bucket states for %d charges (G10: one per charge, in order)", what, len(q),
			len(charges))
		return nil
	}
	for i, b := range q {
		c := charges[i]
		if b.Kind != c.Kind {
			t.Errorf("%s: bucket state %d is of kind %q, want %q (the charges' order)", what, i, b.Kind,
				c.Kind)
		}
		if b.Headroom+b.ResetAfter != c.Capacity {
			t.Errorf("%s: %s: headroom %v + reset-after %v, want its capacity %v", what, c.Kind, b.Headroom,
				b.ResetAfter, c.Capacity)
		}
	}
	return q
}

// wantBucket fails the clause unless b's reset-after is within
// [reset − elapsed, reset], its headroom within [capacity − reset,
// capacity − reset + elapsed], and its denial as told.
func (t *clauseT) wantBucket(what string, b fleetstore.Bucket, c fleetstore.Charge, reset,
	elapsed time.Duration, denied bool) {
	what += ": " + string(b.Kind)
	t.within(what+" reset-after", b.ResetAfter, max(reset-elapsed, 0), reset)
	t.within(what+" headroom", b.Headroom, c.Capacity-reset,
		min(c.Capacity-reset+elapsed, c.Capacity))
	if b.Denied != denied {
		t.Errorf("%s: denied %v, want %v", what, b.Denied, denied)
	}
}

// quotaInOrder: with two kinds of different rates, each state is its own
// bucket's, in the charges' order whichever it is, and a denial names the
// kind that denied it and reports the one that would have conformed
// unchanged.
func (t *clauseT) quotaInOrder() {
	st := t.open()
	tenant := t.tenant()
	hooks := charge(fleetstore.Hooks, tenant, time.Second, 5*time.Second)
	bytes := charge(fleetstore.Bytes, tenant, 3*time.Second, 9*time.Second)
	start := t.now()
	res := t.hit(st, []fleetstore.Charge{hooks, bytes}, nil)
	t.want("hooks and bytes on fresh buckets", res, fleetstore.OK)
	if q := t.quota("hooks and bytes", res, hooks, bytes); q != nil {
		e := t.since(start)
		t.wantBucket("hooks and bytes", q[0], hooks, time.Second, e, false)
		t.wantBucket("hooks and bytes", q[1], bytes, 3*time.Second, e, false)
	}

	// The other order: the states follow the charges.
	res = t.hit(st, []fleetstore.Charge{bytes, hooks}, nil)
	t.want("bytes and hooks", res, fleetstore.OK)
	if q := t.quota("bytes and hooks", res, bytes, hooks); q != nil {
		e := t.since(start)
		t.wantBucket("bytes and hooks", q[0], bytes, 6*time.Second, e, false)
		t.wantBucket("bytes and hooks", q[1], hooks, 2*time.Second, e, false)
	}

	// bytes holds 3s of 9s, a charge of 4s does not fit: hooks would
	// conform (2s + 1s ≤ 5s) but is not charged.
	big := bytes
	big.Increment = 4 * time.Second
	res = t.hit(st, []fleetstore.Charge{hooks, big}, nil)
	t.want("hooks and 4s of bytes", res, fleetstore.RateLimited)
	if q := t.quota("hooks and 4s of bytes", res, hooks, big); q != nil {
		e := t.since(start)
		t.wantBucket("hooks and 4s of bytes (denied by bytes)", q[0], hooks, 2*time.Second, e, false)
		t.wantBucket("hooks and 4s of bytes (denied by bytes)", q[1], big, 6*time.Second, e, true)
		t.within("hooks and 4s of bytes: retry-after (what bytes lacks)", res.RetryAfter,
			gcra.RetryAfter((time.Second - e).Microseconds()), time.Second)
	}
}

// quotaUncharged: the answers that charge nothing (the own retry's OK,
// Pending, Duplicate) report the buckets as they stand, a bucket never
// charged as full, and a Hit without charges reports none.
func (t *clauseT) quotaUncharged() {
	st := t.open()
	tenant := t.tenant()
	hooks := charge(fleetstore.Hooks, tenant, time.Second, 5*time.Second)
	fresh := charge("never", tenant, 2*time.Second, 4*time.Second)
	claim := t.claimFor(tenant, "hook-a")
	start := t.now()
	t.want("the first hit", t.hit(st, []fleetstore.Charge{hooks}, &claim), fleetstore.OK)

	check := func(what string, res fleetstore.Result, o fleetstore.Outcome) {
		t.want(what, res, o)
		if q := t.quota(what, res, hooks, fresh); q != nil {
			e := t.since(start)
			t.wantBucket(what+" (charged once, by the first hit)", q[0], hooks, time.Second, e, false)
			t.wantBucket(what+" (never charged: full)", q[1], fresh, 0, 0, false)
		}
	}
	both := []fleetstore.Charge{hooks, fresh}
	check("the own retry", t.hit(st, both, &claim), fleetstore.OK)
	check("another hook while pending", t.hit(st, both, other(claim, "hook-b")), fleetstore.Pending)
	t.commit(st, claim)
	check("another hook once committed", t.hit(st, both, other(claim, "hook-c")),
		fleetstore.Duplicate)

	res := t.hit(st, nil, other(claim, "hook-d"))
	t.want("a claim without charges", res, fleetstore.Duplicate)
	if q := res.Quota(); len(q) != 0 {
		t.Errorf("a Hit without charges: %d bucket states, want none", len(q))
	}
}
