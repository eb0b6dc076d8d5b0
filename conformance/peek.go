package conformance

import (
	"errors"
	"strings"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/gcra"
)

func init() {
	register("G11", "Peek reports each limit's bucket as it stands, of its tenant alone, "+
		"charging and writing nothing", testG11)
}

// peekLimits are G11's limits: hours an increment, so that the time the
// clause takes never shows in a remaining count. A limit whose kind is
// never charged is full.
var peekLimits = struct{ hooks, bytes, never fleetstore.Limit }{
	hooks: fleetstore.MustLimit(fleetstore.NewLimit(fleetstore.Hooks, 1, time.Hour, 5)),
	bytes: fleetstore.MustLimit(fleetstore.NewLimit(fleetstore.Bytes, 1, 3*time.Hour, 3)),
	never: fleetstore.MustLimit(fleetstore.NewLimit("never", 1, time.Hour, 2)),
}

// testG11: a Peek answers as a Hit of one unit of each limit would, with
// the buckets as they stand; it charges nothing (a Hit after it finds the
// buckets it left), writes nothing (no record made, no expiry moved), and
// reads its own tenant's buckets only (one differing in a byte's case is
// another). A driver without driver.Peeker skips the clause.
func testG11(t *clauseT) {
	st := t.open()
	if _, err := st.Peek(t.ctx(), t.tenant()); errors.Is(err, errors.ErrUnsupported) {
		t.Skipf("the driver has no driver.Peeker: %v", err)
	} else if err != nil {
		t.Fatalf("peek of no limits: %v", err)
	}
	l := peekLimits
	hooks, bytes := l.hooks.Charge("", 1), l.bytes.Charge("", 1)
	// Two tenants one byte's case apart, as a key that folds case would
	// confuse them.
	tenant := strings.ToLower(t.tenant()) + "a"
	twin := tenant[:len(tenant)-1] + "A"

	// A tenant never charged: every bucket full, and the Peek left no
	// record behind.
	res := t.peek(st, "a fresh tenant", tenant, l.hooks, l.bytes)
	t.want("peek of a fresh tenant", res, fleetstore.OK)
	t.wantPeeked("peek of a fresh tenant", res, []fleetstore.Limit{l.hooks, l.bytes}, 0,
		[]int64{5, 3})
	if t.s.cfg.Records != nil {
		if recs := t.records(tenant); len(recs) > 0 {
			t.Errorf("a peek of a tenant with no buckets left records: %v", recs)
		}
	}

	// One unit of each, then peeks in any order, with a kind never charged.
	hooks.Tenant, bytes.Tenant = tenant, tenant
	start := t.now()
	t.want("the first hit", t.hit(st, []fleetstore.Charge{hooks, bytes}, nil), fleetstore.OK)
	var before []Record
	if t.s.cfg.Records != nil {
		before = t.records(tenant)
	}
	for range 3 {
		res = t.peek(st, "hooks and bytes", tenant, l.hooks, l.bytes)
		t.want("peek after one unit of each", res, fleetstore.OK)
		t.wantPeeked("peek after one unit of each", res, []fleetstore.Limit{l.hooks, l.bytes},
			0, []int64{4, 2})
		q := res.Quota()
		t.wantBucket("peek after one unit of each", q[0], hooks, time.Hour, t.since(start), false)
		t.wantBucket("peek after one unit of each", q[1], bytes, 3*time.Hour, t.since(start), false)
	}
	res = t.peek(st, "bytes, a kind never charged, hooks", tenant, l.bytes, l.never, l.hooks)
	t.wantPeeked("bytes, a kind never charged, hooks", res,
		[]fleetstore.Limit{l.bytes, l.never, l.hooks}, 0, []int64{2, 2, 4})
	if q := res.Quota(); len(q) == 3 {
		t.wantBucket("bytes, never, hooks", q[0], bytes, 3*time.Hour, t.since(start), false)
		t.wantBucket("bytes, never, hooks", q[1], l.never.Charge(tenant, 1), 0, 0, false)
		t.wantBucket("bytes, never, hooks", q[2], hooks, time.Hour, t.since(start), false)
	}
	if t.s.cfg.Records != nil {
		t.wantUnmoved("the peeks", before, t.records(tenant))
	}

	// The twin has buckets of its own.
	res = t.peek(st, "the twin tenant", twin, l.hooks, l.bytes)
	t.wantPeeked("peek of a tenant one byte's case apart from a charged one", res,
		[]fleetstore.Limit{l.hooks, l.bytes}, 0, []int64{5, 3})

	// The peeks charged nothing: the next Hit finds the first one's unit
	// alone, and three more drain hooks.
	res = t.hit(st, []fleetstore.Charge{hooks}, nil)
	t.want("a hit after the peeks", res, fleetstore.OK)
	if q := t.quota("a hit after the peeks", res, hooks); q != nil {
		t.wantBucket("a hit after the peeks (the peeks charged nothing)", q[0], hooks, 2*time.Hour,
			t.since(start), false)
	}
	if n := t.conforming(st, hooks, 4); n != 3 {
		t.Fatalf("after 2 of hooks' 5 units, %d of 4 more conformed, want 3", n)
	}

	// Drained: the Peek answers as the denied Hit does.
	denied := t.hit(st, []fleetstore.Charge{hooks, bytes}, nil)
	t.want("a hit on drained hooks", denied, fleetstore.RateLimited)
	res = t.peek(st, "drained hooks", tenant, l.hooks, l.bytes)
	t.want("peek of drained hooks", res, fleetstore.RateLimited)
	e := t.since(start)
	t.within("peek of drained hooks: retry-after", res.RetryAfter,
		gcra.RetryAfter((time.Hour - e).Microseconds()), denied.RetryAfter)
	t.wantPeeked("peek of drained hooks", res, []fleetstore.Limit{l.hooks, l.bytes}, time.Hour,
		[]int64{0, 2})
	if q := res.Quota(); len(q) == 2 {
		t.wantBucket("peek of drained hooks", q[0], hooks, 5*time.Hour, e, true)
		t.wantBucket("peek of drained hooks", q[1], bytes, 3*time.Hour, e, false)
	}

	// The largest valid Peek: a 1024-byte tenant, MaxCharges limits.
	long := strings.Repeat("t", 1023) + randHex(1)[:1]
	var most []fleetstore.Limit
	for i := range fleetstore.MaxCharges {
		most = append(most, fleetstore.MustLimit(fleetstore.NewLimit(
			fleetstore.Kind("k"+strings.Repeat("_", 30)+string(rune('a'+i))), 1, time.Hour, 1)))
	}
	res = t.peek(st, "the largest valid peek", long, most...)
	t.wantPeeked("the largest valid peek", res, most, 0, []int64{1, 1, 1, 1})
}

// peek calls Peek and fails the clause on an error.
func (t *clauseT) peek(st *fleetstore.Store, what, tenant string,
	limits ...fleetstore.Limit) fleetstore.Result {
	res, err := st.Peek(t.ctx(), tenant, limits...)
	if err != nil {
		t.Fatalf("peek (%s): unexpected error: %v", what, err)
	}
	return res
}

// wantPeeked fails the clause unless res holds one bucket state per
// limit, of its kind and in order, with headroom + reset-after = its
// capacity, left[i] units left (Limit.Remaining: exact, as the clause's
// time is far less than an increment), denied exactly when one unit does
// not fit, no retry-after unless RateLimited, and then at most wait (0:
// any), and not Local.
func (t *clauseT) wantPeeked(what string, res fleetstore.Result, limits []fleetstore.Limit,
	wait time.Duration, left []int64) {
	q := res.Quota()
	if len(q) != len(limits) {
		t.Fatalf("%s: %d bucket states for %d limits (G11: one per limit, in order)", what, len(q),
			len(limits))
	}
	if res.Local {
		t.Errorf("%s: answered Local from a Store whose shared store answers", what)
	}
	for i, b := range q {
		lim := limits[i]
		if b.Kind != lim.Kind() {
			t.Errorf("%s: bucket state %d is of kind %q, want %q (the limits' order)", what, i, b.Kind,
				lim.Kind())
		}
		if b.Headroom+b.ResetAfter != lim.Capacity() {
			t.Errorf("%s: %s: headroom %v + reset-after %v, want its capacity %v", what, b.Kind,
				b.Headroom, b.ResetAfter, lim.Capacity())
		}
		if got := lim.Remaining(b); got != left[i] {
			t.Errorf("%s: %s: %d units left (headroom %v), want %d", what, b.Kind, got, b.Headroom,
				left[i])
		}
		if one := lim.Charge("", 1).Increment; b.Denied != (b.Headroom < one) {
			t.Errorf("%s: %s: denied %v with headroom %v for a unit of %v", what, b.Kind, b.Denied,
				b.Headroom, one)
		}
	}
	if res.Outcome != fleetstore.RateLimited && res.RetryAfter != 0 {
		t.Errorf("%s: %s with retry-after %v, want none", what, describe(res), res.RetryAfter)
	}
	if wait > 0 && res.RetryAfter > wait {
		t.Errorf("%s: retry-after %v, want at most %v", what, res.RetryAfter, wait)
	}
}

// wantUnmoved fails the clause unless after holds the records of before,
// none added or gone, none expiring later than it did: nothing written.
func (t *clauseT) wantUnmoved(what string, before, after []Record) {
	ttl := make(map[string]time.Duration, len(before))
	for _, r := range before {
		ttl[r.Key] = r.TTL
	}
	if len(after) != len(before) {
		t.Errorf("%s: records %v before, %v after: a peek writes nothing", what, before, after)
	}
	for _, r := range after {
		was, ok := ttl[r.Key]
		switch {
		case !ok:
			t.Errorf("%s made record %q: a peek writes nothing", what, r.Key)
		case r.TTL > was:
			t.Errorf("%s moved record %q's expiry from %v ahead to %v: a peek writes nothing", what,
				r.Key, was, r.TTL)
		}
	}
}
