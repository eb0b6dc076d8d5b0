package degraded

import (
	"context"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore/driver"
)

// hooksCharge is 10 hooks a second with a burst of 10.
var hooksCharge = driver.Charge{Tenant: "t", Kind: "hooks", Increment: 100 * time.Millisecond,
	Capacity: time.Second}

// TestLocalStoreShare: at a share of 1/2 a burst of 10 admits 5 here,
// each Result local, and each local decision counted.
func TestLocalStoreShare(t *testing.T) {
	fb, _ := newTestConn(t, Rules{})
	fb.local.share = OfNodes(2)
	ok := 0
	for range 10 {
		res, err := fb.local.hit([]driver.Charge{hooksCharge}, nil)
		if err != nil || !res.Local {
			t.Fatalf("local hit: %+v %v, want a local Result", res, err)
		}
		if res.Outcome == driver.OK {
			ok++
		}
	}
	if ok != 5 {
		t.Errorf("%d of 10 admitted at a share of 1/2 of a burst of 10, want 5", ok)
	}
	if n := fb.n.localDecisions.Load(); n != 10 {
		t.Errorf("%d local decisions counted, want 10", n)
	}
}

// TestLocalStoreHeld: a claim taken here is Pending for another hook's
// Hit decided shared (held), and left to the shared store for its own
// hook's retry or another key.
func TestLocalStoreHeld(t *testing.T) {
	fb, _ := newTestConn(t, Rules{})
	if fb.local.mayHoldPending() {
		t.Fatal("a fresh local store may hold a pending claim")
	}
	mine := testClaim("k", "a")
	if res, err := fb.local.hit(nil, &mine); err != nil || res.Outcome != driver.OK {
		t.Fatalf("local claim: %+v %v", res, err)
	}
	other := testClaim("k", "b")
	res, ok, err := fb.local.held([]driver.Charge{hooksCharge}, &other)
	if !ok || err != nil || res.Outcome != driver.Pending || res.RetryAfter <= 0 ||
		res.NBuckets != 1 {
		t.Errorf("another hook's claim: %+v %v %v, want Pending with a retry-after and the bucket",
			res, ok, err)
	}
	if _, ok, _ := fb.local.held(nil, &mine); ok {
		t.Error("the holder's own retry was answered here, want the shared store to decide")
	}
	otherKey := testClaim("k2", "b")
	if _, ok, _ := fb.local.held(nil, &otherKey); ok {
		t.Error("a claim on another key was answered here, want the shared store to decide")
	}
}

// TestLocalStoreSeed: a claim this node committed in the shared store
// (the recent commits) is a Duplicate naming its committer here, and
// takes no claim of its own.
func TestLocalStoreSeed(t *testing.T) {
	fb, _ := newTestConn(t, Rules{})
	c := testClaim("k", "committer")
	fb.local.recent.add([]driver.Claim{c}, nil)
	retry := testClaim("k", "retry")
	res, err := fb.local.hit(nil, &retry)
	if err != nil || res.Outcome != driver.Duplicate || res.HookID != "committer" {
		t.Errorf("a retry of a recent commit: %+v %v, want Duplicate naming committer", res, err)
	}
}

// TestLocalStoreClaimsCap: past maxClaims claims, a Hit is decided on its
// charges alone, without a claim (ClaimsDropped).
func TestLocalStoreClaimsCap(t *testing.T) {
	fb, _ := newTestConn(t, Rules{})
	fb.local.maxClaims, fb.local.checkEvery = 2, 1
	for _, k := range []string{"a", "b", "c", "d"} {
		c := testClaim(k, "h")
		if res, err := fb.local.hit(nil, &c); err != nil || res.Outcome != driver.OK {
			t.Fatalf("hit %s: %+v %v", k, res, err)
		}
	}
	if n := fb.local.claims(); n != 2 {
		t.Errorf("%d claims held with a cap of 2 counted at every decision, want 2", n)
	}
	if n := fb.n.claimsDropped.Load(); n != 2 {
		t.Errorf("%d Hits decided without their claim past the cap, want 2", n)
	}
}

// TestToldDuplicateRemembered: a Duplicate the shared store answered this
// node is remembered as its recent commits are: while degraded, the same
// event at this node is a Duplicate naming the committer, not admitted
// again.
func TestToldDuplicateRemembered(t *testing.T) {
	fb, shared := newTestConn(t, Rules{})
	ctx := context.Background()
	if errs, err := shared.Commit(ctx, []driver.Claim{testClaim("k", "elsewhere")}); err != nil ||
		errs[0] != nil {
		t.Fatal(errs, err)
	}
	first := testClaim("k", "first")
	if res, err := fb.Hit(ctx, nil, &first); err != nil || res.Outcome != driver.Duplicate ||
		res.Local {
		t.Fatalf("shared hit: %+v %v, want the shared store's Duplicate", res, err)
	}
	retry := testClaim("k", "retry")
	res, err := fb.local.hit(nil, &retry)
	if err != nil || res.Outcome != driver.Duplicate || res.HookID != "elsewhere" {
		t.Errorf("the event again while degraded: %+v %v, want Duplicate naming elsewhere", res, err)
	}
}
