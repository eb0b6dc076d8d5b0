package conformance

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/gcra"
)

// slack is how far a time measured across calls may drift on a loaded
// 2-core machine.
const slack = 2 * time.Second

func init() {
	register("G1", "exactly burst B charges conform on a fresh bucket; the next is RateLimited "+
		"with RetryAfter ≈ increment", testG1)
	register("G2", "retry-after is rounded up: retrying at RetryAfter conforms", testG2)
	register("G3", "a Hit's charges are all-or-nothing; RetryAfter is the largest wait", testG3)
	register("G4", "concurrent charges from several Stores admit exactly what a serial run admits",
		testG4)
	register("G5", "kinds and tenants are independent; Reset forgets every kind of one tenant only",
		testG5)
	register("G6", "increment > capacity returns ErrOverCapacity and writes nothing", testG6)
	register("G7", "bucket state never outlives its TAT by more than the expiry granularity", testG7)
	register("G8", "every Store of the fleet sees one timeline", testG8)
	register("G9", "sub-millisecond and multi-hour increments both work", testG9)
}

func testG1(t *clauseT) {
	st := t.open()
	const inc = 10 * time.Second
	for _, burst := range []int{1, 3, 7} {
		c := charge(fleetstore.Hooks, t.tenant(), inc, time.Duration(burst)*inc)
		start := t.now()
		if got := t.conforming(st, c, burst); got != burst {
			t.Fatalf("burst %d: %d of %d back-to-back charges conformed, want all", burst, got, burst)
		}
		res := t.hit(st, []fleetstore.Charge{c}, nil)
		t.want("charge after the burst", res, fleetstore.RateLimited)
		t.within("retry-after after the burst", res.RetryAfter, inc-t.since(start)-slack, inc)
	}
}

func testG2(t *clauseT) {
	st := t.open()
	// Increment 10.5ms: right after a charge the wait is 10.5ms minus the
	// time between the two charges, so a wait with a fractional millisecond
	// part is certain when they are less than 0.5ms apart. The retry-after
	// must then be at least the wait rounded up: a rounded-down value sends
	// callers back too early.
	const inc = 10500 * time.Microsecond
	tight := 0
	for attempt := 0; attempt < 20; attempt++ {
		c := charge(fleetstore.Hooks, t.tenant(), inc, inc)
		start := t.now()
		first := t.hit(st, []fleetstore.Charge{c}, nil)
		t.want("first charge", first, fleetstore.OK)
		res := t.hit(st, []fleetstore.Charge{c}, nil)
		between := t.since(start)
		if res.Outcome == fleetstore.OK {
			continue // the two charges were more than 10.5ms apart
		}
		t.want("second charge", res, fleetstore.RateLimited)
		// Whatever the round trip: the bucket state (G10) is the wait in
		// µs. A fresh bucket's charge leaves exactly the increment; the
		// denial's is that less the store's time between the two, which
		// is at most between; and the retry-after is the denial's wait
		// rounded up. A store that rounds its state down to whole ms fails
		// here, also when its Hits are too slow for the check below.
		r1, r2 := first.Quota()[0].ResetAfter, res.Quota()[0].ResetAfter
		if r1 != inc {
			t.Fatalf("a charge of %v on a fresh bucket left a reset-after of %v, want exactly %v "+
				"(state rounded?)", inc, r1, inc)
		}
		if d := r1 - r2; d < 0 || d > between {
			t.Fatalf("reset-after %v after the charge, %v at the denial %v later: the store's "+
				"time moved %v (state rounded?)", r1, r2, between, d)
		}
		if want := gcra.RetryAfter(r2.Microseconds()); res.RetryAfter < want {
			t.Fatalf("retry-after %v for a wait of %v: want at least %v (rounded down?)", res.RetryAfter,
				r2, want)
		}
		floor := gcra.RetryAfter((inc - between).Microseconds()) // of the least possible wait
		if res.RetryAfter < floor {
			t.Fatalf("retry-after %v after a charge of %v at most %v earlier: the wait was at least "+
				"%v, so it must be at least %v (rounded down?)",
				res.RetryAfter, inc, between, inc-between, floor)
		}
		if res.RetryAfter > 11*time.Millisecond {
			t.Errorf("retry-after %v, want at most %v (the increment rounded up)", res.RetryAfter,
				11*time.Millisecond)
		}
		if between < 500*time.Microsecond {
			tight++
		}
		t.sleep(res.RetryAfter)
		t.want("retry at retry-after", t.hit(st, []fleetstore.Charge{c}, nil), fleetstore.OK)
		if tight >= 3 {
			return
		}
	}
	t.Logf("only %d of 20 attempts had two charges within 0.5ms: rounding was checked against the "+
		"bucket states (G10), and loosely against the time between the charges", tight)
}

func testG3(t *clauseT) {
	st := t.open()
	tenant := t.tenant()
	hooks := charge(fleetstore.Hooks, tenant, time.Second, 10*time.Second)
	bytes := charge(fleetstore.Bytes, tenant, time.Second, time.Second)
	slow := charge("slow", tenant, 5*time.Second, 5*time.Second)
	t.want("drain bytes", t.hit(st, []fleetstore.Charge{bytes}, nil), fleetstore.OK)
	t.want("drain slow", t.hit(st, []fleetstore.Charge{slow}, nil), fleetstore.OK)

	claim := t.claimFor(tenant, "hook-a")
	start := t.now()
	res := t.hit(st, []fleetstore.Charge{hooks, bytes, slow}, &claim)
	t.want("hit with two drained buckets", res, fleetstore.RateLimited)
	t.within("retry-after (the largest wait: slow's 5s, not bytes' 1s)", res.RetryAfter,
		5*time.Second-t.since(start)-slack, 5*time.Second)

	// Nothing was written: hooks still has all 10 units, the claim is free.
	other := claim
	other.HookID = "hook-b"
	t.want("claim after the denial (must be free)", t.hit(st, nil, &other), fleetstore.OK)
	if got := t.conforming(st, hooks, 10); got != 10 {
		t.Fatalf("hooks bucket: %d of 10 charges conform after a denied Hit, want 10 (the denied "+
			"Hit charged it)", got)
	}
}

func testG4(t *clauseT) {
	const burst, callers = 50, 200
	c := charge(fleetstore.Hooks, t.tenant(), time.Minute, burst*time.Minute)
	stores, admitted, limited := t.race(c, callers, nil)
	if admitted != burst || limited != callers-burst {
		t.Fatalf("%d concurrent charges over %d stores: %d admitted, %d limited; a serial run "+
			"admits exactly %d", callers, stores, admitted, limited, burst)
	}
}

// race makes callers Hits of c at once, spread over Config.Stores Stores,
// and returns how many Stores, and how many Hits were OK and
// RateLimited; ok, when not nil, is called with each OK Result (from
// several goroutines). Any other answer is an error of the clause.
func (t *clauseT) race(c fleetstore.Charge, callers int, ok func(fleetstore.Result)) (
	stores int, admitted, limited int64) {
	sts := make([]*fleetstore.Store, t.s.cfg.Stores)
	for i := range sts {
		sts[i] = t.open()
	}
	var nOK, nLimited atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res, err := sts[i%len(sts)].Hit(t.ctx(), []fleetstore.Charge{c}, nil)
			switch {
			case err != nil:
				t.Errorf("concurrent hit: %v", err)
			case res.Outcome == fleetstore.OK:
				nOK.Add(1)
				if ok != nil {
					ok(res)
				}
			case res.Outcome == fleetstore.RateLimited:
				nLimited.Add(1)
			default:
				t.Errorf("concurrent hit: got %s", describe(res))
			}
		}()
	}
	close(start)
	wg.Wait()
	return len(sts), nOK.Load(), nLimited.Load()
}

func testG5(t *clauseT) {
	st := t.open()
	a, b := t.tenant(), t.tenant()
	aHooks := charge(fleetstore.Hooks, a, time.Hour, time.Hour)
	aBytes := charge(fleetstore.Bytes, a, time.Hour, time.Hour)
	bHooks := charge(fleetstore.Hooks, b, time.Hour, time.Hour)
	t.want("drain a/hooks", t.hit(st, []fleetstore.Charge{aHooks}, nil), fleetstore.OK)
	t.want("a/bytes after a/hooks drained (independent kind)",
		t.hit(st, []fleetstore.Charge{aBytes}, nil), fleetstore.OK)
	t.want("b/hooks after a/hooks drained (independent tenant)",
		t.hit(st, []fleetstore.Charge{bHooks}, nil), fleetstore.OK)
	held := t.claimFor(a, "hook-a")
	t.want("a's claim", t.hit(st, nil, &held), fleetstore.OK)
	t.want("a/hooks drained", t.hit(st, []fleetstore.Charge{aHooks}, nil), fleetstore.RateLimited)
	t.want("a/bytes drained", t.hit(st, []fleetstore.Charge{aBytes}, nil), fleetstore.RateLimited)
	if err := st.Reset(t.ctx(), a); err != nil {
		t.Fatalf("reset: %v", err)
	}
	t.want("a/hooks after Reset(a)", t.hit(st, []fleetstore.Charge{aHooks}, nil), fleetstore.OK)
	t.want("a/bytes after Reset(a)", t.hit(st, []fleetstore.Charge{aBytes}, nil), fleetstore.OK)
	t.want("b/hooks after Reset(a) (must still be drained)",
		t.hit(st, []fleetstore.Charge{bHooks}, nil), fleetstore.RateLimited)
	t.want("a's claim after Reset(a) (claims are kept)", t.hit(st, nil, other(held, "hook-b")),
		fleetstore.Pending)
	if err := st.Reset(t.ctx(), t.tenant()); err != nil {
		t.Fatalf("reset of a tenant with no buckets: %v", err)
	}
}

func testG6(t *clauseT) {
	st := t.open()
	tenant := t.tenant()
	ok := charge(fleetstore.Hooks, tenant, time.Second, time.Second)
	over := charge(fleetstore.Bytes, tenant, 2*time.Second, time.Second)
	claim := t.claimFor(tenant, "hook-a")
	_, err := st.Hit(t.ctx(), []fleetstore.Charge{ok, over}, &claim)
	t.wantErr("increment > capacity", err, fleetstore.ErrOverCapacity)
	if errors.Is(err, fleetstore.ErrInvalid) {
		t.Errorf("over capacity also matches ErrInvalid: %v", err)
	}
	t.want("the other charge after the error (nothing written)",
		t.hit(st, []fleetstore.Charge{ok}, nil), fleetstore.OK)
	claim.HookID = "hook-b"
	t.want("the claim after the error (nothing written)", t.hit(st, nil, &claim), fleetstore.OK)
}

func testG7(t *clauseT) {
	if t.s.cfg.Records == nil {
		t.Skipf("Config.Records is not set: the store's records cannot be seen")
	}
	st := t.open()
	gran := t.s.cfg.Granularity
	const inc = 400 * time.Millisecond
	var tenant string
	var recs []Record
	// The record must be there while its TAT is ahead; on a machine so
	// loaded that the charge and the read took longer than that, it may
	// rightly be gone: try again, on a fresh tenant, up to three times.
	for attempt := 1; ; attempt++ {
		tenant = t.tenant()
		c1 := charge(fleetstore.Hooks, tenant, inc, 2*inc)
		c2 := charge(fleetstore.Bytes, tenant, inc/2, inc)
		start := t.now()
		t.want("charge", t.hit(st, []fleetstore.Charge{c1, c2}, nil), fleetstore.OK)
		recs = t.records(tenant)
		took := t.since(start)
		if len(recs) > 0 {
			break
		}
		if took < inc || attempt == 3 {
			t.Fatalf("no record for a tenant charged %v before (its TAT %v ahead)", took, inc)
		}
		t.Logf("attempt %d: charge and read took %v, past the TAT: again", attempt, took)
	}
	for _, r := range recs {
		if r.TTL < 0 {
			t.Errorf("record %q has no expiry", r.Key)
		} else if r.TTL > inc+gran {
			t.Errorf("record %q expires in %v: its TAT is %v ahead, granularity %v", r.Key, r.TTL, inc,
				gran)
		}
	}
	t.sleep(inc + gran + 100*time.Millisecond)
	if recs := t.records(tenant); len(recs) > 0 {
		t.Errorf("records left %v after their TAT passed: %v", inc+gran+100*time.Millisecond, recs)
	}
}

func (t *clauseT) records(tenant string) []Record {
	recs, err := t.s.cfg.Records(t.ctx(), t.s.prefix, tenant)
	if err != nil {
		t.Fatalf("Config.Records: %v", err)
	}
	return recs
}

func testG8(t *clauseT) {
	a, b := t.open(), t.open()
	const inc = 800 * time.Millisecond
	var c fleetstore.Charge
	var start time.Time
	var res fleetstore.Result
	// B's answer counts only if it came within inc of A's charge: a
	// machine stalled longer saw the bucket drain, and tries again.
	for attempt := 1; ; attempt++ {
		c = charge(fleetstore.Hooks, t.tenant(), inc, inc)
		t.want("warm-up of store B", t.hit(b, []fleetstore.Charge{bucket(t.tenant())}, nil),
			fleetstore.OK)
		charged := t.now()
		t.want("charge on store A", t.hit(a, []fleetstore.Charge{c}, nil), fleetstore.OK)
		start = t.now()
		res = t.hit(b, []fleetstore.Charge{c}, nil)
		if late := t.since(charged); late < inc || attempt == 3 {
			break
		}
		t.Logf("attempt %d: store B answered %v after A's charge, past the increment: again",
			attempt, t.since(charged))
	}
	t.want("the same bucket on store B", res, fleetstore.RateLimited)
	t.within("store B's retry-after for a bucket A just charged", res.RetryAfter,
		inc-t.since(start)-slack/4, inc)
	t.sleep(res.RetryAfter)
	t.want("store A at B's retry-after", t.hit(a, []fleetstore.Charge{c}, nil), fleetstore.OK)
}

func testG9(t *clauseT) {
	st := t.open()
	// Multi-hour: 3h increment, burst 2.
	hours := charge(fleetstore.Hooks, t.tenant(), 3*time.Hour, 6*time.Hour)
	if got := t.conforming(st, hours, 3); got != 2 {
		t.Errorf("3h increment, 6h capacity: %d of 3 back-to-back charges conformed, want 2", got)
	}
	res := t.hit(st, []fleetstore.Charge{hours}, nil)
	t.want("3h bucket drained", res, fleetstore.RateLimited)
	t.within("3h bucket retry-after", res.RetryAfter, 3*time.Hour-slack, 3*time.Hour)

	// 1.9s: whole-second expiry would forget the bucket at 1s.
	odd := charge(fleetstore.Hooks, t.tenant(), 1900*time.Millisecond, 1900*time.Millisecond)
	t.want("1.9s charge", t.hit(st, []fleetstore.Charge{odd}, nil), fleetstore.OK)
	t.sleep(1200 * time.Millisecond)
	res = t.hit(st, []fleetstore.Charge{odd}, nil)
	t.want("1.9s bucket 1.2s later (the TAT is 0.7s ahead)", res, fleetstore.RateLimited)
	t.within("1.9s bucket retry-after", res.RetryAfter, time.Millisecond, 700*time.Millisecond)

	// 125µs: a denial waits less than a millisecond and reports 1ms; the
	// charges admitted over a window never exceed window/125µs + 1.
	sub := charge(fleetstore.Hooks, t.tenant(), 125*time.Microsecond, 125*time.Microsecond)
	start := t.now()
	admitted := 0
	for range 400 {
		res := t.hit(st, []fleetstore.Charge{sub}, nil)
		switch res.Outcome {
		case fleetstore.OK:
			admitted++
		case fleetstore.RateLimited:
			if res.RetryAfter != time.Millisecond {
				t.Fatalf("125µs bucket: retry-after %v, want 1ms (the wait is under 125µs)", res.RetryAfter)
			}
		}
	}
	window := t.since(start)
	if max := int(window/(125*time.Microsecond)) + 2; admitted > max {
		t.Errorf("125µs bucket: %d charges admitted in %v, at most %d possible", admitted, window, max)
	}
	if admitted == 0 {
		t.Errorf("125µs bucket: no charge admitted")
	}
}
