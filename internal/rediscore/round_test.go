package rediscore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/internal/scripts"
	"github.com/fleetstore/fleetstore/internal/testing/testserver"
	"github.com/fleetstore/fleetstore/nettest"
)

// Rounds with Hits (group.go, plan.go, round.lua), on both drivers of the
// core against real servers: Hits queued while a round is in flight go
// in the next round with the Commits and Releases queued beside them, and
// each is decided as if it had been sent alone, in the order of the
// calls, within its own budget, at most once.

// hooksCharge charges tenant's hooks bucket 1h of a 3h capacity: three
// Hits fill it.
func hooksCharge(tenant string) fleetstore.Charge {
	return fleetstore.Charge{Kind: fleetstore.Hooks, Tenant: tenant, Increment: time.Hour, Capacity: 3 * time.Hour}
}

// bytesCharge charges tenant's bytes bucket 4h of 5h: a second one is denied.
func bytesCharge(tenant string) fleetstore.Charge {
	return fleetstore.Charge{Kind: fleetstore.Bytes, Tenant: tenant, Increment: 4 * time.Hour,
		Capacity: 5 * time.Hour}
}

// roundStep is one call of a round, with what it must answer.
type roundStep struct {
	name   string
	do     func(ctx context.Context) (fleetstore.Result, error)
	want   fleetstore.Outcome
	settle bool   // a Commit or Release: want no error
	holder string // a Duplicate's hook_id
	got    fleetstore.Result
	err    error
}

// TestRoundDecidesInOrder: with the server stopped (SIGSTOP) and a Commit
// of the tenant in flight (its lane busy), eleven Hits, Commits and Releases of one
// tenant queue, 100ms apart; when the server runs again they go as one
// round — two script calls in all — and each is decided as if sent alone,
// in order:
//
//   - a denied Hit (its bytes bucket full) writes nothing: the Hits after
//     it find the hooks bucket as the Hits before it left it (G3), so the
//     third Hit on the 3h bucket is OK and the fourth denied — both see
//     the TATs of the Hits before them (G1, G4);
//   - two Hits on one claim: the first is OK, the second Pending (C3);
//   - a Commit after them commits the first's claim, and a Hit after the
//     Commit is a Duplicate naming it (C4, C5); a Release of a committed
//     claim is ErrAlreadyCommitted (C6).
//
// On one server and on a cluster (one tenant: one slot, one script call).
// Fails if a denied Hit charges, if a round's Hits read the buckets or
// the claims before the others' writes, or if a round is out of order.
func TestRoundDecidesInOrder(t *testing.T) {
	t.Parallel()
	onServerAndCluster(t, testRoundInOrder)
}

func testRoundInOrder(t *testing.T, raw string, _ bool, servers ...*testserver.Redis) {
	st, _, _ := openWarm(t, raw)
	tenant := "tr-" + randHex(3)
	// The bytes bucket 4h full: a second bytes charge is denied.
	if res, err := st.Hit(gctx(t, 5*time.Second), []fleetstore.Charge{bytesCharge(tenant)}, nil); err != nil ||
		res.Outcome != fleetstore.OK {
		t.Fatalf("first bytes charge: %v %v", res.Outcome, err)
	}
	waitLibrary(t, servers...)
	hit := func(charges []fleetstore.Charge, c *fleetstore.Claim) func(context.Context) (fleetstore.Result, error) {
		return func(ctx context.Context) (fleetstore.Result, error) { return st.Hit(ctx, charges, c) }
	}
	hooks := []fleetstore.Charge{hooksCharge(tenant)}
	denied := []fleetstore.Charge{hooksCharge(tenant), bytesCharge(tenant)}
	key := newClaim(tenant, "h1")
	key2, key3 := key, key
	key2.HookID, key3.HookID = "h2", "h3"
	other := newClaim(tenant, "ho")
	steps := []*roundStep{
		{name: "hooks 1", do: hit(hooks, nil), want: fleetstore.OK},
		{name: "hooks+bytes, bytes full", do: hit(denied, nil), want: fleetstore.RateLimited},
		{name: "hooks 2", do: hit(hooks, nil), want: fleetstore.OK},
		{name: "hooks 3", do: hit(hooks, nil), want: fleetstore.OK},
		{name: "hooks 4, bucket full", do: hit(hooks, nil), want: fleetstore.RateLimited},
		{name: "claim by h1", do: hit(nil, &key), want: fleetstore.OK},
		{name: "claim by h2", do: hit(nil, &key2), want: fleetstore.Pending},
		{name: "commit by h1", settle: true, do: func(ctx context.Context) (fleetstore.Result, error) {
			return fleetstore.Result{}, st.Commit(ctx, key)
		}},
		{name: "claim by h3", do: hit(nil, &key3), want: fleetstore.Duplicate, holder: "h1"},
		{name: "other claim by ho", do: hit(nil, &other), want: fleetstore.OK},
		{name: "release of h1's committed claim", settle: true,
			do: func(ctx context.Context) (fleetstore.Result, error) {
				err := st.Release(ctx, key)
				if errors.Is(err, fleetstore.ErrAlreadyCommitted) {
					err = nil
				}
				return fleetstore.Result{}, err
			}},
	}
	before := scriptCalls(t, servers...)
	for _, srv := range servers {
		if err := srv.Freeze(); err != nil {
			t.Fatal(err)
		}
	}
	thawed := false
	thaw := func() {
		if thawed {
			return
		}
		thawed = true
		for _, srv := range servers {
			if err := srv.Thaw(); err != nil {
				t.Error(err)
			}
		}
	}
	defer thaw()
	var wg sync.WaitGroup
	var first error
	wg.Go(func() { first = st.Commit(gctx(t, 20*time.Second), newClaim(tenant, "first")) })
	time.Sleep(200 * time.Millisecond)
	for _, s := range steps {
		wg.Go(func() { s.got, s.err = s.do(gctx(t, 20*time.Second)) })
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	thaw()
	wg.Wait()
	if first != nil {
		t.Fatalf("the Commit in flight: %v", first)
	}
	var b strings.Builder
	for _, s := range steps {
		fmt.Fprintf(&b, "%s: %v %v; ", s.name, s.got.Outcome, s.err)
	}
	t.Logf("FIGURE round in order: %s", b.String())
	for _, s := range steps {
		switch {
		case s.err != nil:
			t.Errorf("%s: %v", s.name, s.err)
		case s.settle:
		case s.got.Outcome != s.want || s.got.HookID != s.holder:
			t.Errorf("%s: %v (holder %q), want %v (holder %q)", s.name, s.got.Outcome, s.got.HookID, s.want,
				s.holder)
		}
	}
	if got := scriptCalls(t, servers...) - before; got != 2 {
		t.Errorf("%d script calls, want 2: the Commit in flight, then one round of the %d calls "+
			"queued behind it", got, len(steps))
	}
}

// TestRoundOwnBudgetHits: each Hit of a round keeps its own deadline
// (T1). With the server stopped (SIGSTOP): a Hit is in flight with a 1s
// deadline; three more queue behind it with deadlines of 6s, 2s and
// 0.4s. The 0.4s one returns ErrTimeout at its deadline and is never
// sent; at 1s the first times out and the next round goes; the 2s one
// returns ErrTimeout at its deadline while its round is in flight (it was
// sent: its claim is pending once the server runs again); the 6s one gets
// OK when the server runs again, at 3s.
func TestRoundOwnBudgetHits(t *testing.T) {
	t.Parallel()
	for _, d := range drivers {
		t.Run(d.scheme, func(t *testing.T) {
			t.Parallel()
			srv := testserver.StartRedis(t, testserver.Binary(d.bin))
			raw := d.scheme + "://" + srv.Addr
			st, prefix, tenant := openWarm(t, raw)
			warmConns(t, st, srv)
			if err := srv.Freeze(); err != nil {
				t.Fatal(err)
			}
			thawed := false
			thaw := func() {
				if !thawed {
					thawed = true
					if err := srv.Thaw(); err != nil {
						t.Error(err)
					}
				}
			}
			defer thaw()
			type call struct {
				name            string
				after, deadline time.Duration
				claim           fleetstore.Claim
				res             fleetstore.Result
				err             error
				took            time.Duration
			}
			calls := []*call{
				{name: "first", deadline: time.Second},
				{name: "6s", after: 200 * time.Millisecond, deadline: 6 * time.Second},
				{name: "2s", after: 200 * time.Millisecond, deadline: 2 * time.Second},
				{name: "0.4s", after: 200 * time.Millisecond, deadline: 400 * time.Millisecond},
			}
			var wg sync.WaitGroup
			for _, c := range calls {
				c.claim = newClaim(tenant, "hook-"+c.name)
				wg.Go(func() {
					time.Sleep(c.after)
					t0 := time.Now()
					c.res, c.err = st.Hit(gctx(t, c.deadline), []fleetstore.Charge{hooksCharge(tenant)}, &c.claim)
					c.took = time.Since(t0)
				})
			}
			time.Sleep(3 * time.Second)
			thaw()
			wg.Wait()
			var b strings.Builder
			for _, c := range calls {
				fmt.Fprintf(&b, "%s %v (%v %v); ", c.name, c.took.Round(time.Millisecond), c.res.Outcome, c.err)
			}
			t.Logf("FIGURE round own budget: %s", b.String())
			const slack = 300 * time.Millisecond
			for _, c := range calls {
				if c.name == "6s" {
					if c.err != nil || c.res.Outcome != fleetstore.OK {
						t.Errorf("%s: %v %v, want OK: the round was cut short by another call's budget", c.name,
							c.res.Outcome, c.err)
					}
					continue
				}
				if !errors.Is(c.err, fleetstore.ErrTimeout) {
					t.Errorf("%s: %v, want ErrTimeout", c.name, c.err)
				}
				if c.took > c.deadline+slack || c.took < c.deadline-50*time.Millisecond {
					t.Errorf("%s: returned after %v, deadline %v", c.name, c.took, c.deadline)
				}
			}
			check := reopen(t, raw, prefix)
			pendingFor(t, check, calls[2].claim) // sent, its answer dropped
			free(t, check, calls[3].claim)       // never sent
		})
	}
}

// pendingFor checks that c is pending for its hook: another hook's Hit
// is Pending.
func pendingFor(t *testing.T, st *fleetstore.Store, c fleetstore.Claim) {
	t.Helper()
	c.HookID = "probe-" + randHex(4)
	res, err := st.Hit(gctx(t, 5*time.Second), nil, &c)
	if err != nil || res.Outcome != fleetstore.Pending {
		t.Errorf("claim %s: Hit by another hook: %v %v, want Pending: the Hit was sent", c.Key, res.Outcome, err)
	}
}

// TestRoundLostReplyHits: a round of Hits whose reply is lost is sent
// once (T5). Through a proxy that drops the replies: a Hit with a 1s
// deadline, then 8 more (3s) queued behind it, which go as one round when
// the first times out. Every Hit fails with ErrTimeout, the server ran
// two script calls, and the tenant's bucket was charged once per Hit: a
// probe finds 9 increments of 1h on it, not more.
func TestRoundLostReplyHits(t *testing.T) {
	t.Parallel()
	for _, d := range drivers {
		t.Run(d.scheme, func(t *testing.T) {
			t.Parallel()
			srv := testserver.StartRedis(t, testserver.Binary(d.bin))
			p := nettest.NewProxy(t, srv.Addr, nil)
			st, prefix, tenant := openWarm(t, d.scheme+"://"+p.Addr(), fleetstore.WithTimeout(4*time.Second))
			warmConns(t, st, srv)
			waitLibrary(t, srv)
			charge := fleetstore.Charge{Kind: fleetstore.Hooks, Tenant: tenant, Increment: time.Hour,
				Capacity: 100 * time.Hour}

			before := scriptCalls(t, srv)
			p.DropReplies(true)
			const n = 8
			errs := make([]error, n+1)
			var wg sync.WaitGroup
			for i := range errs {
				deadline := 3 * time.Second
				if i == 0 {
					deadline = time.Second
				}
				wg.Go(func() {
					if i > 0 {
						time.Sleep(100 * time.Millisecond)
					}
					t0 := time.Now()
					_, errs[i] = st.Hit(gctx(t, deadline), []fleetstore.Charge{charge}, nil)
					if took := time.Since(t0); took > deadline+300*time.Millisecond {
						t.Errorf("hit %d took %v, deadline %v", i, took, deadline)
					}
				})
			}
			wg.Wait()
			p.DropReplies(false)
			for i, err := range errs {
				if !errors.Is(err, fleetstore.ErrTimeout) {
					t.Errorf("hit %d whose reply was lost: %v, want ErrTimeout", i, err)
				}
			}
			calls := scriptCalls(t, srv) - before
			t.Logf("FIGURE round lost reply: %d script calls for %d Hits", calls, n+1)
			if calls != 2 {
				t.Errorf("%d script calls, want 2 (the first alone, then one round): a call was re-sent, "+
					"or the round was not one", calls)
			}
			check := reopen(t, d.scheme+"://"+srv.Addr, prefix)
			probe := charge
			probe.Increment = time.Microsecond
			res, err := check.Hit(gctx(t, 5*time.Second), []fleetstore.Charge{probe}, nil)
			if err != nil {
				t.Fatal(err)
			}
			// 9 increments of 1h, less the seconds since.
			if got := res.Buckets[0].ResetAfter; got < 9*time.Hour-time.Minute || got > 9*time.Hour+time.Second {
				t.Errorf("bucket's reset-after %v, want about 9h: one charge per Hit", got)
			}
		})
	}
}

// nodeOf is the index of the cluster node that holds tenant's slot
// (testserver gives node i the i-th third of the slots).
func nodeOf(t *testing.T, cl *testserver.Cluster, prefix, tenant string) int {
	t.Helper()
	v, err := cl.Nodes[0].Do("CLUSTER", "KEYSLOT", scripts.ShardKey(prefix, tenant, 0))
	if err != nil {
		t.Fatal(err)
	}
	slot, ok := v.(int64)
	if !ok {
		t.Fatalf("CLUSTER KEYSLOT: %#v", v)
	}
	return int(slot) * 3 / 16384
}

// TestRoundLanesPerTenant: on a cluster a round in flight to one tenant's
// slot holds up no call of another tenant. With the node of tenant A
// stopped (SIGSTOP) and a Hit of A in flight, a Hit of A queued behind it
// waits, but Hits and a Commit of a tenant B on another node are
// answered at once. Fails with one lane for all (B's calls wait for A's
// round until the node runs again).
func TestRoundLanesPerTenant(t *testing.T) {
	t.Parallel()
	for _, d := range drivers {
		t.Run(d.scheme, func(t *testing.T) {
			t.Parallel()
			cl := testserver.StartCluster(t, testserver.Binary(d.bin))
			st, prefix := openGroup(t, cl.URLScheme(d.scheme))
			a := "ta-" + randHex(3)
			b := "tb-" + randHex(3)
			for nodeOf(t, cl, prefix, b) == nodeOf(t, cl, prefix, a) {
				b = "tb-" + randHex(3)
			}
			for _, tenant := range []string{a, b} { // the client built, the library on both nodes
				if err := st.Commit(gctx(t, 5*time.Second), newClaim(tenant, "warm")); err != nil {
					t.Fatal(err)
				}
			}
			waitLibrary(t, cl.Nodes...)
			node := cl.Nodes[nodeOf(t, cl, prefix, a)]
			if err := node.Freeze(); err != nil {
				t.Fatal(err)
			}
			thawed := false
			thaw := func() {
				if !thawed {
					thawed = true
					if err := node.Thaw(); err != nil {
						t.Error(err)
					}
				}
			}
			defer thaw()
			var wg sync.WaitGroup
			errA := make([]error, 2)
			for i := range errA {
				wg.Go(func() {
					time.Sleep(time.Duration(i) * 100 * time.Millisecond)
					_, errA[i] = st.Hit(gctx(t, 10*time.Second), []fleetstore.Charge{hooksCharge(a)}, nil)
				})
			}
			time.Sleep(300 * time.Millisecond)
			t0 := time.Now()
			var errB [3]error
			var resB [2]fleetstore.Result
			var wgB sync.WaitGroup
			for i := range resB {
				wgB.Go(func() {
					resB[i], errB[i] = st.Hit(gctx(t, 10*time.Second), []fleetstore.Charge{hooksCharge(b)}, nil)
				})
			}
			wgB.Go(func() { errB[2] = st.Commit(gctx(t, 10*time.Second), newClaim(b, "hb")) })
			wgB.Wait()
			took := time.Since(t0)
			thaw()
			wg.Wait()
			t.Logf("FIGURE round lanes: tenant B's calls took %v with tenant A's node stopped", took)
			if took > 2*time.Second {
				t.Errorf("tenant B's calls took %v with tenant A's node stopped: held up by A's round", took)
			}
			for i, err := range errB {
				if err != nil {
					t.Errorf("tenant B call %d: %v", i, err)
				}
			}
			for i, r := range resB {
				if r.Outcome != fleetstore.OK {
					t.Errorf("tenant B Hit %d: %v, want OK", i, r.Outcome)
				}
			}
			for i, err := range errA {
				if err != nil {
					t.Errorf("tenant A Hit %d, answered once its node ran again: %v", i, err)
				}
			}
		})
	}
}
