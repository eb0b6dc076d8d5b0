package fleetstore_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore"
)

// TestFallbackRecentCommits: a node remembers what it committed (CONTRACT
// §8). Hooks committed while the store was healthy, by a Commit or by the
// replay of an earlier outage's outbox, are Duplicates naming their
// committer when the provider's retry reaches this node during an outage,
// after the charges as C4 has it: a retry the limit denies is RateLimited.
// An event this node never committed is admitted locally.
func TestFallbackRecentCommits(t *testing.T) {
	t.Parallel()
	st := openFlaky(t, fleetstore.Fallback{})
	ctx := context.Background()
	committed := hookClaim("healthy", "h-healthy")
	if res, err := st.Hit(ctx, []fleetstore.Charge{bigCharge}, &committed); err != nil || res.Local || res.Outcome != fleetstore.OK {
		t.Fatalf("healthy hit: %+v %v", res, err)
	}
	if err := st.Commit(ctx, committed); err != nil {
		t.Fatalf("healthy commit: %v", err)
	}

	// An outage whose commit is replayed: the replay is a commit of this
	// node's too, and the local store forgets it once replayed.
	st.d.set(refused)
	replayed := hookClaim("replayed", "h-replayed")
	if res, err := st.Hit(ctx, []fleetstore.Charge{bigCharge}, &replayed); err != nil || !res.Local || res.Outcome != fleetstore.OK {
		t.Fatalf("degraded hit: %+v %v", res, err)
	}
	if err := st.Commit(ctx, replayed); err != nil {
		t.Fatalf("degraded commit: %v", err)
	}
	st.d.set(healthy)
	if s := recovered(t, st); s.Replayed != 1 {
		t.Fatalf("stats %+v, want 1 replayed", s)
	}
	if !waitFor(5*time.Second, func() bool { return fleetstore.LocalClaims(st.Store) == 0 }) {
		t.Fatalf("the local store holds %d claims after the replay, want none", fleetstore.LocalClaims(st.Store))
	}

	// The next outage: both are Duplicates here, a new event is not.
	st.d.set(refused)
	for _, c := range []fleetstore.Claim{committed, replayed} {
		retry := c
		retry.HookID = "h-retry-" + c.Key
		res, err := st.Hit(ctx, []fleetstore.Charge{bigCharge}, &retry)
		if err != nil || !res.Local || res.Outcome != fleetstore.Duplicate || res.HookID != c.HookID {
			t.Errorf("a retry of %s at the node that committed it, during an outage: %+v %v, want a local Duplicate of %s", c.Key, res, err, c.HookID)
		}
		// Asked again: the same answer (the local store holds it now).
		if res, _ := st.Hit(ctx, nil, &retry); res.Outcome != fleetstore.Duplicate || res.HookID != c.HookID {
			t.Errorf("a second retry of %s: %+v, want a Duplicate of %s", c.Key, res, c.HookID)
		}
	}
	fresh := hookClaim("fresh", "h-fresh")
	if res, err := st.Hit(ctx, []fleetstore.Charge{bigCharge}, &fresh); err != nil || !res.Local || res.Outcome != fleetstore.OK {
		t.Errorf("a new event during the outage: %+v %v, want a local OK", res, err)
	}
	// The charges come first: a retry the local limit denies is
	// RateLimited, as the shared store would answer it.
	tight := fleetstore.Charge{Kind: fleetstore.Bytes, Tenant: "acme", Increment: time.Hour, Capacity: time.Hour}
	if res, err := st.Hit(ctx, []fleetstore.Charge{tight}, nil); err != nil || res.Outcome != fleetstore.OK {
		t.Fatalf("the tight bucket's first charge: %+v %v", res, err)
	}
	retry := committed
	retry.HookID = "h-retry-limited"
	if res, err := st.Hit(ctx, []fleetstore.Charge{tight}, &retry); err != nil || res.Outcome != fleetstore.RateLimited {
		t.Errorf("a retry of a committed hook over the limit: %+v %v, want rate_limited (C4: charges first)", res, err)
	}
}

// TestFallbackRecentCommitsBound: the index holds the newest
// fallback_recent commits; the oldest is forgotten, and a commit past its
// TTL is not a Duplicate (the local store's clock decides).
func TestFallbackRecentCommitsBound(t *testing.T) {
	t.Parallel()
	var now atomic.Int64
	now.Store(1_800_000_000_000_000)
	d := newFlaky()
	name := fmt.Sprintf("recent-bound-%d", flakySeq.Add(1))
	st, err := fleetstore.OpenDriver(d, "memory://"+name+"?fallback_recent=3",
		fleetstore.WithFallback(fleetstore.Fallback{Nodes: 2}), fleetstore.WithTimeout(200*time.Millisecond),
		fleetstore.WithLocalClock(now.Load))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ctx := context.Background()
	claims := make([]fleetstore.Claim, 5)
	for i := range claims {
		claims[i] = hookClaim(fmt.Sprintf("k%d", i), fmt.Sprintf("h%d", i))
		claims[i].TTL = time.Minute
		if i == 4 {
			claims[i].TTL = time.Hour
		}
		if res, err := st.Hit(ctx, nil, &claims[i]); err != nil || res.Local {
			t.Fatalf("healthy hit: %+v %v", res, err)
		}
	}
	// k0 alone, then k1–k4 in one batch: the index of 3 keeps k2, k3, k4.
	if err := st.Commit(ctx, claims[0]); err != nil {
		t.Fatal(err)
	}
	if err := st.Commit(ctx, claims[1:]...); err != nil {
		t.Fatal(err)
	}
	d.set(refused)
	ask := func(i int) fleetstore.Result {
		t.Helper()
		retry := claims[i]
		retry.HookID = "h-retry"
		res, err := st.Hit(ctx, nil, &retry)
		if err != nil || !res.Local {
			t.Fatalf("hit during the outage: %+v %v", res, err)
		}
		return res
	}
	for _, i := range []int{0, 1} {
		if res := ask(i); res.Outcome != fleetstore.OK {
			t.Errorf("k%d, the oldest of 5 commits in an index of 3: %+v, want OK (forgotten)", i, res)
		}
	}
	now.Add((59 * time.Second).Microseconds())
	if res := ask(2); res.Outcome != fleetstore.Duplicate || res.HookID != "h2" {
		t.Errorf("k2 59s into its TTL of 1m: %+v, want a Duplicate of h2", res)
	}
	now.Add((2 * time.Second).Microseconds())
	for _, i := range []int{2, 3} {
		if res := ask(i); res.Outcome != fleetstore.OK {
			t.Errorf("k%d 61s into its TTL of 1m: %+v, want OK (expired)", i, res)
		}
	}
	if res := ask(4); res.Outcome != fleetstore.Duplicate || res.HookID != "h4" {
		t.Errorf("k4 61s into its TTL of 1h: %+v, want a Duplicate of h4", res)
	}
}
