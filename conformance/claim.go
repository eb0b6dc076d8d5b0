package conformance

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/gcra"
)

func init() {
	register("C1", "Hit on an absent claim: OK, charges taken, claim pending for this hook", testC1)
	register("C2", "Hit on its own pending claim: OK, checked before the charges, charges nothing",
		testC2)
	register("C3", "Hit on a claim pending for another hook: Pending with the remaining time, "+
		"nothing charged", testC3)
	register("C4", "Hit on a committed claim: Duplicate naming the committer, nothing charged",
		testC4)
	register("C5", "settle a pending claim of the same hook: Commit commits for TTL, Release deletes",
		testC5)
	register("C6", "settle a claim committed by the same hook: Commit is a no-op, "+
		"Release is ErrAlreadyCommitted", testC6)
	register("C7", "settle an absent claim: Commit records it for this hook, Release is a no-op",
		testC7)
	register("C8", "settle a claim held by another hook: ErrClaimLost naming the holder, no change",
		testC8)
	register("C9", "pending claims expire after PendingTTL, committed ones after TTL; "+
		"TTLs above 30 days work", testC9)
	register("C10", "N hooks racing for one key: exactly one OK; a batch settle reports each claim",
		testC10)
}

// bucket is a one-kind budget of ten one-hour units, so that counting what
// is left shows exactly what a Hit charged.
func bucket(tenant string) fleetstore.Charge {
	return charge(fleetstore.Hooks, tenant, time.Hour, 10*time.Hour)
}

// wantLeft fails unless exactly n of c's units are left.
func (t *clauseT) wantLeft(what string, st *fleetstore.Store, c fleetstore.Charge, n int) {
	if got := t.conforming(st, c, n+1); got != n {
		t.Fatalf("%s: %d units left in the bucket, want %d", what, got, n)
	}
}

func other(c fleetstore.Claim, hook string) *fleetstore.Claim {
	c.HookID = hook
	return &c
}

func testC1(t *clauseT) {
	st := t.open()
	tenant := t.tenant()
	b := bucket(tenant)
	claim := t.claimFor(tenant, "hook-a")
	t.want("hit on an absent claim", t.hit(st, []fleetstore.Charge{b}, &claim), fleetstore.OK)
	res := t.hit(st, nil, other(claim, "hook-b"))
	t.want("another hook on the claim just taken", res, fleetstore.Pending)
	t.wantLeft("after one OK hit", st, b, 9)
}

func testC2(t *clauseT) {
	st := t.open()
	tenant := t.tenant()
	b := bucket(tenant)
	claim := t.claimFor(tenant, "hook-a")
	t.want("first hit", t.hit(st, []fleetstore.Charge{b}, &claim), fleetstore.OK)
	for i := range 3 {
		t.want(fmt.Sprintf("retry %d of the same hook", i+1), t.hit(st, []fleetstore.Charge{b}, &claim),
			fleetstore.OK)
	}
	// A drained bucket does not stop the retry: the own claim comes first.
	full := charge(fleetstore.Bytes, tenant, time.Hour, time.Hour)
	t.want("drain bytes", t.hit(st, []fleetstore.Charge{full}, nil), fleetstore.OK)
	t.want("retry with a drained bucket", t.hit(st, []fleetstore.Charge{b, full}, &claim),
		fleetstore.OK)
	t.wantLeft("after one hit and four retries", st, b, 9)

	// A retry writes nothing: the claim still frees PendingTTL after the
	// first hit, not after the retry.
	short := t.claimFor(tenant, "hook-a")
	short.PendingTTL = 3 * time.Second
	t.want("first hit", t.hit(st, nil, &short), fleetstore.OK)
	firstDone := t.now()
	t.sleep(time.Second)
	t.want("retry a second later", t.hit(st, nil, &short), fleetstore.OK)
	asked := t.now()
	res := t.hit(st, nil, other(short, "hook-b"))
	t.want("another hook after the retry", res, fleetstore.Pending)
	// The first hit ended by firstDone and this one began after asked: at
	// least asked-firstDone of the claim's time has passed.
	if most := short.PendingTTL - asked.Sub(firstDone) + time.Millisecond; res.RetryAfter > most {
		t.Errorf("pending retry-after %v after a retry: at most %v remain of the first hit's %v "+
			"(the retry rewrote the claim)",
			res.RetryAfter, most, short.PendingTTL)
	}
}

func testC3(t *clauseT) {
	st := t.open()
	tenant := t.tenant()
	b := bucket(tenant)
	claim := t.claimFor(tenant, "hook-a")
	claim.PendingTTL = 5 * time.Second
	start := t.now()
	t.want("hit", t.hit(st, []fleetstore.Charge{b}, &claim), fleetstore.OK)
	hitDone := t.now()
	t.sleep(time.Second)
	asked := t.now()
	res := t.hit(st, []fleetstore.Charge{b}, other(claim, "hook-b"))
	t.want("another hook", res, fleetstore.Pending)
	// The remaining time, not the PendingTTL: at most 5s minus the second
	// slept, rounded up.
	t.within("pending retry-after a second into a 5s claim", res.RetryAfter,
		claim.PendingTTL-t.since(start)-slack, claim.PendingTTL-asked.Sub(hitDone)+time.Millisecond)
	t.wantLeft("after one hit and one pending", st, b, 9)

	// Never more than the PendingTTL: a claim asked about at once has at
	// most its whole PendingTTL (whole ms here) left.
	fresh := t.claimFor(tenant, "hook-a")
	fresh.PendingTTL = 30 * time.Second
	t.want("hit", t.hit(st, nil, &fresh), fleetstore.OK)
	if res := t.hit(st, nil, other(fresh, "hook-b")); res.Outcome == fleetstore.Pending &&
		res.RetryAfter > fresh.PendingTTL {
		t.Errorf("pending retry-after %v right after a hit with PendingTTL %v: "+
			"more than the claim can last", res.RetryAfter, fresh.PendingTTL)
	}

	// Rounded up, never down: a 10.5ms pending claim asked about less than
	// 0.5ms later has more than 10ms left, so its retry-after is 11ms or
	// more (G2's rule for the claim's wait).
	for attempt := 0; attempt < 20; attempt++ {
		c := t.claimFor(tenant, "hook-a")
		c.PendingTTL = 10500 * time.Microsecond
		begin := t.now()
		t.want("hit", t.hit(st, nil, &c), fleetstore.OK)
		res := t.hit(st, nil, other(c, "hook-b"))
		between := t.since(begin)
		if res.Outcome != fleetstore.Pending {
			continue // more than 10.5ms apart
		}
		if floor := gcra.RetryAfter((c.PendingTTL - between).Microseconds()); res.RetryAfter < floor {
			t.Fatalf("pending retry-after %v at most %v after a hit with PendingTTL %v: at least %v "+
				"remained, so it must be at least %v (rounded down?)",
				res.RetryAfter, between, c.PendingTTL, c.PendingTTL-between, floor)
		}
	}
}

func testC4(t *clauseT) {
	st := t.open()
	tenant := t.tenant()
	b := bucket(tenant)
	claim := t.claimFor(tenant, "hook-a")
	t.want("hit", t.hit(st, []fleetstore.Charge{b}, &claim), fleetstore.OK)
	if err := st.Commit(t.ctx(), claim); err != nil {
		t.Fatalf("commit: %v", err)
	}
	for _, hook := range []string{"hook-b", "hook-a"} {
		res := t.hit(st, []fleetstore.Charge{b}, other(claim, hook))
		t.want(hook+" on the committed claim", res, fleetstore.Duplicate)
		if res.HookID != "hook-a" {
			t.Errorf("duplicate names hook %q, want the committer %q", res.HookID, "hook-a")
		}
	}
	t.wantLeft("after one hit and two duplicates", st, b, 9)
	// The charges are checked before the claim: a drained bucket answers
	// RateLimited even for a committed key.
	t.want("committed claim with a drained bucket",
		t.hit(st, []fleetstore.Charge{b}, other(claim, "hook-c")), fleetstore.RateLimited)
}

func (t *clauseT) commit(st *fleetstore.Store, c fleetstore.Claim) {
	if err := st.Commit(t.ctx(), c); err != nil {
		t.Fatalf("commit: %v", err)
	}
}

func testC5(t *clauseT) {
	st := t.open()
	tenant := t.tenant()
	claim := t.claimFor(tenant, "hook-a")
	claim.TTL = 2 * time.Second
	t.want("hit", t.hit(st, nil, &claim), fleetstore.OK)
	// Commit 1.5s after the hit: a TTL counted from the hit would end 0.5s
	// after the commit.
	t.sleep(1500 * time.Millisecond)
	committedAt := t.now()
	t.commit(st, claim)
	res := t.hit(st, nil, other(claim, "hook-b"))
	t.want("after commit", res, fleetstore.Duplicate)
	if res.HookID != "hook-a" {
		t.Errorf("duplicate names %q, want %q", res.HookID, "hook-a")
	}
	if t.s.cfg.Records != nil {
		for _, r := range t.records(tenant) {
			if r.TTL < 0 || r.TTL > claim.TTL+t.s.cfg.Granularity {
				t.Errorf("record %q expires in %v after a commit with TTL %v", r.Key, r.TTL, claim.TTL)
			}
		}
	}
	// Expires TTL from the commit, not from the hit.
	t.sleep(1200*time.Millisecond - t.since(committedAt))
	t.want("1.2s after a commit with TTL 2s made 1.5s after the hit",
		t.hit(st, nil, other(claim, "hook-b")), fleetstore.Duplicate)

	rel := t.claimFor(tenant, "hook-a")
	t.want("hit", t.hit(st, nil, &rel), fleetstore.OK)
	// Release needs no TTL (CONTRACT §6): the claim as a caller may build
	// it to give it up, identity and hook alone.
	bare := fleetstore.Claim{Tenant: rel.Tenant, SourceID: rel.SourceID, Key: rel.Key,
		HookID: rel.HookID}
	if err := st.Release(t.ctx(), bare); err != nil {
		t.Fatalf("release of its own pending claim, without TTLs: %v", err)
	}
	t.want("another hook after release", t.hit(st, nil, other(rel, "hook-b")), fleetstore.OK)
}

func testC6(t *clauseT) {
	st := t.open()
	claim := t.claimFor(t.tenant(), "hook-a")
	t.want("hit", t.hit(st, nil, &claim), fleetstore.OK)
	t.commit(st, claim)
	t.commit(st, claim) // no change, nil
	err := st.Release(t.ctx(), claim)
	t.wantErr("release of a committed claim", err, fleetstore.ErrAlreadyCommitted)
	res := t.hit(st, nil, other(claim, "hook-b"))
	t.want("after commit, commit, release", res, fleetstore.Duplicate)
	if res.HookID != "hook-a" {
		t.Errorf("duplicate names %q, want %q", res.HookID, "hook-a")
	}
}

func testC7(t *clauseT) {
	st := t.open()
	tenant := t.tenant()
	absent := t.claimFor(tenant, "hook-a")
	t.commit(st, absent)
	res := t.hit(st, nil, other(absent, "hook-b"))
	t.want("after commit of an absent claim", res, fleetstore.Duplicate)
	if res.HookID != "hook-a" {
		t.Errorf("duplicate names %q, want %q", res.HookID, "hook-a")
	}
	free := t.claimFor(tenant, "hook-a")
	if err := st.Release(t.ctx(), free); err != nil {
		t.Fatalf("release of an absent claim: %v", err)
	}
	t.want("another hook after release of an absent claim", t.hit(st, nil, other(free, "hook-b")),
		fleetstore.OK)
}

func testC8(t *clauseT) {
	st := t.open()
	tenant := t.tenant()
	held := t.claimFor(tenant, "hook-holder")
	t.want("holder's hit", t.hit(st, nil, &held), fleetstore.OK)
	thief := other(held, "hook-thief")
	settles := []struct {
		name string
		f    func(...fleetstore.Claim) error
	}{
		{"commit", func(c ...fleetstore.Claim) error { return st.Commit(t.ctx(), c...) }},
		{"release", func(c ...fleetstore.Claim) error { return st.Release(t.ctx(), c...) }},
	}
	lost := func(what string, err error) {
		t.wantErr(what, err, fleetstore.ErrClaimLost)
		if !strings.Contains(err.Error(), "hook-holder") {
			t.Errorf("%s: error %q does not name the holder %q", what, err, "hook-holder")
		}
	}
	for _, op := range settles {
		lost(op.name+" by another hook of a pending claim", op.f(*thief))
		t.want("holder's retry after "+op.name+" by another hook (still its own)", t.hit(st, nil, &held),
			fleetstore.OK)
		t.want("third hook after "+op.name+" by another hook", t.hit(st, nil, other(held, "hook-third")),
			fleetstore.Pending)
	}
	t.commit(st, held)
	for _, op := range settles {
		lost(op.name+" by another hook of a committed claim", op.f(*thief))
		res := t.hit(st, nil, other(held, "hook-third"))
		t.want("after "+op.name+" by another hook of a committed claim", res, fleetstore.Duplicate)
		if res.HookID != "hook-holder" {
			t.Errorf("after %s by another hook: duplicate names %q, want %q", op.name, res.HookID,
				"hook-holder")
		}
	}
}

func testC9(t *clauseT) {
	st := t.open()
	tenant := t.tenant()
	gran := t.s.cfg.Granularity
	// Five calls must follow a claim's hit within its PendingTTL: 1s, as
	// a loaded 2-core machine ran them in over 500ms.
	const ttl = time.Second
	wait := ttl + gran + 200*time.Millisecond

	var pending, committed, unhit fleetstore.Claim
	t.want("warm-up", t.hit(st, []fleetstore.Charge{bucket(t.tenant())}, nil), fleetstore.OK)
	// The check before PendingTTL counts only if it came within ttl of
	// the claim's hit: a machine stalled longer saw it expire, and tries
	// again.
	for attempt := 1; ; attempt++ {
		begin := t.now()
		pending = t.claimFor(tenant, "hook-a")
		pending.PendingTTL = ttl
		t.want("hit", t.hit(st, nil, &pending), fleetstore.OK)
		committed = t.claimFor(tenant, "hook-a")
		committed.TTL = ttl
		t.want("hit", t.hit(st, nil, &committed), fleetstore.OK)
		t.commit(st, committed)
		unhit = t.claimFor(tenant, "hook-a")
		unhit.TTL = ttl
		t.commit(st, unhit) // absent: recorded for this hook (C7), for TTL as well
		res := t.hit(st, nil, other(pending, "hook-b"))
		if t.since(begin) < ttl || attempt == 3 {
			t.want("pending claim before PendingTTL", res, fleetstore.Pending)
			break
		}
		t.Logf("attempt %d: the check before PendingTTL came %v after the hit: again", attempt,
			t.since(begin))
	}
	t.sleep(wait)
	t.want(fmt.Sprintf("pending claim %v after a hit with PendingTTL %v", wait, ttl),
		t.hit(st, nil, other(pending, "hook-b")), fleetstore.OK)
	t.want(fmt.Sprintf("committed claim %v after a commit with TTL %v", wait, ttl),
		t.hit(st, nil, other(committed, "hook-b")), fleetstore.OK)
	t.want(fmt.Sprintf("claim committed without a hit, %v after a commit with TTL %v", wait, ttl),
		t.hit(st, nil, other(unhit, "hook-b")), fleetstore.OK)

	// Above 30 days (memcached reads such values as absolute times).
	for _, d := range []time.Duration{30 * 24 * time.Hour, 30*24*time.Hour + time.Second,
		31 * 24 * time.Hour, 366 * 24 * time.Hour} {
		long := t.claimFor(tenant, "hook-a")
		long.PendingTTL, long.TTL = d, d
		t.want("hit", t.hit(st, nil, &long), fleetstore.OK)
		t.want(fmt.Sprintf("pending claim with PendingTTL %v", d), t.hit(st, nil, other(long, "hook-b")),
			fleetstore.Pending)
		t.commit(st, long)
		t.want(fmt.Sprintf("committed claim with TTL %v", d), t.hit(st, nil, other(long, "hook-b")),
			fleetstore.Duplicate)
		if t.s.cfg.Records != nil {
			for _, r := range t.records(tenant) {
				if r.TTL < 0 {
					t.Errorf("record %q has no expiry", r.Key)
				}
			}
		}
	}
}

func testC10(t *clauseT) {
	stores := make([]*fleetstore.Store, t.s.cfg.Stores)
	for i := range stores {
		stores[i] = t.open()
	}
	tenant := t.tenant()
	for round := range 5 {
		base := t.claimFor(tenant, "")
		const hooks = 16
		results := make([]fleetstore.Result, hooks)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range hooks {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				res, err := stores[i%len(stores)].Hit(t.ctx(), nil, other(base, fmt.Sprintf("hook-%d", i)))
				if err != nil {
					t.Errorf("round %d: hit: %v", round, err)
				}
				results[i] = res
			}()
		}
		close(start)
		wg.Wait()
		ok, pending := 0, 0
		for _, r := range results {
			switch r.Outcome {
			case fleetstore.OK:
				ok++
			case fleetstore.Pending:
				pending++
			}
		}
		if ok != 1 || pending != hooks-1 {
			t.Fatalf("round %d: %d hooks racing for one key: %d OK, %d Pending; want 1 and %d", round,
				hooks, ok, pending, hooks-1)
		}
	}

	// A batch settle with one lost claim in the middle.
	st := stores[0]
	good1, lost, good2 := t.claimFor(tenant, "hook-a"), t.claimFor(tenant, "hook-holder"),
		t.claimFor(tenant, "hook-a")
	lost.Key = "evt-lost-" + randHex(4)
	for _, c := range []fleetstore.Claim{good1, lost, good2} {
		t.want("hit", t.hit(st, nil, &c), fleetstore.OK)
	}
	err := st.Commit(t.ctx(), good1, *other(lost, "hook-a"), good2)
	t.wantErr("batch commit with one lost claim", err, fleetstore.ErrClaimLost)
	if !strings.Contains(err.Error(), lost.Key) {
		t.Errorf("batch commit error %q does not name the lost claim's key %q", err, lost.Key)
	}
	if strings.Contains(err.Error(), good1.Key) || strings.Contains(err.Error(), good2.Key) {
		t.Errorf("batch commit error %q names a claim that was settled", err)
	}
	for _, c := range []fleetstore.Claim{good1, good2} {
		res := t.hit(st, nil, other(c, "hook-b"))
		t.want("a good claim of the batch", res, fleetstore.Duplicate)
	}
	t.want("the lost claim (still pending for its holder)", t.hit(st, nil, other(lost, "hook-b")),
		fleetstore.Pending)

	// The same for a batch Release: the good claims are freed, the lost
	// one is reported by name and left to its holder.
	rel1, relLost, rel2 := t.claimFor(tenant, "hook-a"), t.claimFor(tenant, "hook-holder"),
		t.claimFor(tenant, "hook-a")
	for _, c := range []fleetstore.Claim{rel1, relLost, rel2} {
		t.want("hit", t.hit(st, nil, &c), fleetstore.OK)
	}
	err = st.Release(t.ctx(), rel1, *other(relLost, "hook-a"), rel2)
	t.wantErr("batch release with one lost claim", err, fleetstore.ErrClaimLost)
	if !strings.Contains(err.Error(), relLost.Key) || strings.Contains(err.Error(), rel1.Key) ||
		strings.Contains(err.Error(), rel2.Key) {
		t.Errorf("batch release error %q: want it to name the lost claim %q only", err, relLost.Key)
	}
	for _, c := range []fleetstore.Claim{rel1, rel2} {
		t.want("a good claim of the released batch", t.hit(st, nil, other(c, "hook-b")), fleetstore.OK)
	}
	t.want("the lost claim of the released batch", t.hit(st, nil, other(relLost, "hook-b")),
		fleetstore.Pending)

	// Many claims in one batch, half of them held by another hook.
	var batch []fleetstore.Claim
	for i := range 40 {
		hook := "hook-a"
		if i%2 == 1 {
			hook = "hook-holder"
		}
		c := t.claimFor(tenant, hook)
		t.want("hit", t.hit(st, nil, &c), fleetstore.OK)
		c.HookID = "hook-a"
		batch = append(batch, c)
	}
	err = st.Commit(t.ctx(), batch...)
	var joined interface{ Unwrap() []error }
	if !errors.As(err, &joined) || len(joined.Unwrap()) != 20 {
		t.Errorf("batch commit of 40 claims, 20 lost: want 20 joined errors, got %v", err)
	}
	for i, c := range batch {
		want := fleetstore.Duplicate
		if i%2 == 1 {
			want = fleetstore.Pending
		}
		t.want(fmt.Sprintf("claim %d of the batch", i), t.hit(st, nil, other(c, "hook-b")), want)
	}
}
