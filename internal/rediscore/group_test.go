package rediscore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/internal/scripts"
	"github.com/fleetstore/fleetstore/internal/testing/batcherr"
	"github.com/fleetstore/fleetstore/internal/testing/testserver"
	"github.com/fleetstore/fleetstore/nettest"
)

// Group commit (group.go), on both drivers of the core against real
// servers: concurrent Commits and Releases share settle script calls,
// each claim gets its own result, and each call keeps its own budget and
// runs at most once.

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// openGroup opens raw with a fresh key_prefix (returned) and a budget
// wide enough that only the tests' own deadlines run out.
func openGroup(t *testing.T, raw string, opts ...fleetstore.Option) (*fleetstore.Store, string) {
	t.Helper()
	prefix := "gc" + randHex(4)
	sep := "?"
	if strings.Contains(raw, "?") {
		sep = "&"
	}
	opts = append([]fleetstore.Option{fleetstore.WithTimeout(10 * time.Second)}, opts...)
	st, err := fleetstore.Open(raw+sep+"key_prefix="+prefix, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st, prefix
}

// openWarm is openGroup with a fresh tenant (returned) and one Commit of
// it made: the client built, the script run once on the server.
func openWarm(t *testing.T, raw string, opts ...fleetstore.Option) (st *fleetstore.Store,
	prefix, tenant string) {
	t.Helper()
	st, prefix = openGroup(t, raw, opts...)
	tenant = "t-" + randHex(3)
	if err := st.Commit(gctx(t, 5*time.Second), newClaim(tenant, "warm")); err != nil {
		t.Fatal(err)
	}
	return st, prefix, tenant
}

// reopen is a second Store on raw under prefix: the same claims.
func reopen(t *testing.T, raw, prefix string) *fleetstore.Store {
	t.Helper()
	st, err := fleetstore.Open(raw+"?key_prefix="+prefix, fleetstore.WithTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func gctx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func newClaim(tenant, hook string) fleetstore.Claim {
	return fleetstore.Claim{Tenant: tenant, SourceID: "github", Key: "evt-" + randHex(6), HookID: hook,
		Node: "edge-1", TTL: time.Hour, PendingTTL: time.Minute}
}

// waitLibrary waits until each of nodes holds the scripts' function
// library, which the driver loads in the background once a call finds it
// missing (that call, and any before the load is done, run with EVAL
// after a failed FCALL: two script calls). Tests that count script calls
// wait for it first.
func waitLibrary(t *testing.T, nodes ...*testserver.Redis) {
	t.Helper()
	if err := testserver.WaitLibrary(scripts.Library.Name, 10*time.Second, nodes...); err != nil {
		t.Fatal(err)
	}
}

// scriptCalls is the script calls (EVALSHA, EVAL, FCALL) the servers have
// run, from INFO commandstats.
func scriptCalls(t *testing.T, servers ...*testserver.Redis) int {
	t.Helper()
	n := 0
	for _, srv := range servers {
		info, err := srv.Info("commandstats")
		if err != nil {
			t.Fatal(err)
		}
		for _, cmd := range []string{"evalsha", "eval", "fcall"} {
			n += cmdCalls(info, cmd)
		}
	}
	return n
}

func cmdCalls(info, cmd string) int {
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+cmd+":calls="); ok {
			n := 0
			fmt.Sscanf(v, "%d", &n)
			return n
		}
	}
	return 0
}

// warmConns leaves several connections of st to srv open and ready in
// its pool, so that a call made while the server is stopped or its
// replies are lost is written at once, not held up by a new
// connection's handshake: four Pings while the server is stopped, each
// on a connection of its own.
func warmConns(t *testing.T, st *fleetstore.Store, srv *testserver.Redis) {
	t.Helper()
	if err := srv.Freeze(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { _ = st.Ping(gctx(t, 5*time.Second)) })
	}
	time.Sleep(200 * time.Millisecond)
	if err := srv.Thaw(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
}

// committedBy checks that c is committed by hook: another hook's Hit is a
// Duplicate naming it.
func committedBy(t *testing.T, st *fleetstore.Store, c fleetstore.Claim, hook string) {
	t.Helper()
	c.HookID = "probe-" + randHex(4)
	res, err := st.Hit(gctx(t, 5*time.Second), nil, &c)
	if err != nil || res.Outcome != fleetstore.Duplicate || res.HookID != hook {
		t.Errorf("claim %s: Hit by another hook: %v %v %q, want Duplicate naming %q", c.Key, res.Outcome,
			err, res.HookID, hook)
	}
}

// free checks that c was never settled: another hook's Hit is OK.
func free(t *testing.T, st *fleetstore.Store, c fleetstore.Claim) {
	t.Helper()
	c.HookID = "probe-" + randHex(4)
	res, err := st.Hit(gctx(t, 5*time.Second), nil, &c)
	if err != nil || res.Outcome != fleetstore.OK {
		t.Errorf("claim %s: Hit by another hook: %v %v (holder %q), want OK: the claim was sent", c.Key,
			res.Outcome, err, res.HookID)
	}
}

// TestGroupCommitShares: 64 callers Commit and Release concurrently, 5
// times each: batches of three claims over two tenants, one of them held
// by another hook, then a Release of one committed. Every claim gets its
// own result in its own caller, at its own index (C6–C8, C10), the claims
// are committed for their own hooks (fencing), and the servers run fewer
// settle script calls than there were Commits and Releases. On one
// server and on a cluster (one call per tenant and mode per round).
// Fails without group commit (one script call per call at least).
func TestGroupCommitShares(t *testing.T) {
	t.Parallel()
	onServerAndCluster(t, func(t *testing.T, raw string, _ bool, servers ...*testserver.Redis) {
		testGroupCommitShares(t, raw, servers...)
	})
}

func testGroupCommitShares(t *testing.T, raw string, servers ...*testserver.Redis) {
	st, _ := openGroup(t, raw)
	const callers, rounds = 64, 5
	tenants := [2]string{"ta-" + randHex(3), "tb-" + randHex(3)}
	held := make([][]fleetstore.Claim, callers)
	var all []fleetstore.Claim
	for g := range held {
		for range rounds {
			c := newClaim(tenants[g%2], "other")
			held[g] = append(held[g], c)
			all = append(all, c)
		}
	}
	if err := st.Commit(gctx(t, 10*time.Second), all...); err != nil { // also loads the script
		t.Fatalf("commit of the held claims: %v", err)
	}
	waitLibrary(t, servers...)
	before := scriptCalls(t, servers...)
	var wg sync.WaitGroup
	mine := make([][]fleetstore.Claim, callers)
	for g := range callers {
		wg.Go(func() {
			hook := fmt.Sprintf("hook-%d", g)
			for r := range rounds {
				batch := []fleetstore.Claim{newClaim(tenants[0], hook), held[g][r], newClaim(tenants[1], hook)}
				batch[1].HookID = hook
				errs, whole := batcherr.Split(st.Commit(gctx(t, 10*time.Second), batch...), 3)
				if whole != nil {
					t.Errorf("caller %d: commit failed as a whole: %v", g, whole)
					return
				}
				var lost *fleetstore.ClaimLostError
				if errs[0] != nil || errs[2] != nil || !errors.As(errs[1], &lost) || lost.Holder != "other" {
					t.Errorf("caller %d: commit: %v, want nil, ErrClaimLost held by other, nil", g, errs)
				}
				mine[g] = append(mine[g], batch[0], batch[2])
				err := st.Release(gctx(t, 10*time.Second), batch[2])
				if !errors.Is(err, fleetstore.ErrAlreadyCommitted) {
					t.Errorf("caller %d: release of its committed claim: %v, want ErrAlreadyCommitted", g,
						err)
				}
			}
		})
	}
	wg.Wait()
	calls := scriptCalls(t, servers...) - before
	settles := callers * rounds * 2
	t.Logf("FIGURE group commit: %d settle calls of %d callers made %d script calls (%.2f per call)",
		settles, callers, calls, float64(calls)/float64(settles))
	if calls >= settles {
		t.Errorf("%d script calls for %d concurrent Commits and Releases: want fewer (group commit)",
			calls, settles)
	}
	for g := range callers {
		for _, c := range mine[g] {
			committedBy(t, st, c, fmt.Sprintf("hook-%d", g))
		}
		for _, c := range held[g] {
			committedBy(t, st, c, "other")
		}
	}
}

// TestGroupCommitOwnBudget: each call of a round keeps its own deadline
// (T1). With the server stopped (SIGSTOP): a Commit is in flight with a
// 1s deadline; three more queue behind it, with deadlines of 6s, 2s and
// 0.4s after they start, and a fourth is cancelled while it waits. The
// 0.4s one and the cancelled one return at their own end, and their
// claims are never sent; at 1s the first times out and the next round
// goes, sent by the 6s caller; the 2s one returns ErrTimeout at its
// deadline while its round is still in flight (its claim was sent: it is
// committed once the server runs again); the 6s one gets its answer when
// the server runs again, which a round bound to any earlier deadline
// would not have waited for.
func TestGroupCommitOwnBudget(t *testing.T) {
	t.Parallel()
	for _, d := range drivers {
		t.Run(d.scheme, func(t *testing.T) {
			t.Parallel()
			srv := testserver.StartRedis(t, testserver.Binary(d.bin))
			raw := d.scheme + "://" + srv.Addr
			st, prefix, tenant := openWarm(t, raw)
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
				name     string
				after    time.Duration // start, after the first
				deadline time.Duration // from its start; 0: cancelled at cancelAt
				claim    fleetstore.Claim
				err      error
				took     time.Duration
			}
			const cancelAt = 500 * time.Millisecond
			calls := []*call{
				{name: "first", deadline: time.Second},
				{name: "6s", after: 200 * time.Millisecond, deadline: 6 * time.Second},
				{name: "2s", after: 200 * time.Millisecond, deadline: 2 * time.Second},
				{name: "0.4s", after: 200 * time.Millisecond, deadline: 400 * time.Millisecond},
				{name: "cancelled", after: 200 * time.Millisecond},
			}
			var wg sync.WaitGroup
			for _, c := range calls {
				c.claim = newClaim(tenant, "hook-"+c.name)
				wg.Go(func() {
					time.Sleep(c.after)
					ctx, cancel := context.WithCancel(context.Background())
					defer cancel()
					if c.deadline > 0 {
						ctx, cancel = context.WithTimeout(ctx, c.deadline)
						defer cancel()
					} else {
						time.AfterFunc(cancelAt-c.after, cancel)
					}
					t0 := time.Now()
					c.err = st.Commit(ctx, c.claim)
					c.took = time.Since(t0)
				})
			}
			time.Sleep(3 * time.Second)
			thaw()
			wg.Wait()
			t.Logf("FIGURE group commit own budget: %s", func() string {
				var b strings.Builder
				for _, c := range calls {
					fmt.Fprintf(&b, "%s %v (%v); ", c.name, c.took.Round(time.Millisecond), c.err)
				}
				return b.String()
			}())
			const slack = 300 * time.Millisecond
			for _, c := range calls {
				switch c.name {
				case "6s":
					if c.err != nil {
						t.Errorf("%s: %v, want nil: the round was cut short by another call's budget", c.name, c.err)
					}
				case "cancelled":
					if !errors.Is(c.err, context.Canceled) || errors.Is(c.err, fleetstore.ErrTimeout) {
						t.Errorf("%s: %v, want context.Canceled", c.name, c.err)
					}
					if c.took > cancelAt-c.after+slack {
						t.Errorf("%s: returned after %v, cancelled after %v", c.name, c.took, cancelAt-c.after)
					}
				default:
					if !errors.Is(c.err, fleetstore.ErrTimeout) || !errors.Is(c.err, context.DeadlineExceeded) {
						t.Errorf("%s: %v, want ErrTimeout", c.name, c.err)
					}
					if c.took > c.deadline+slack || c.took < c.deadline-50*time.Millisecond {
						t.Errorf("%s: returned after %v, deadline %v", c.name, c.took, c.deadline)
					}
				}
			}
			check := reopen(t, raw, prefix)
			committedBy(t, check, calls[1].claim, "hook-6s")
			committedBy(t, check, calls[2].claim, "hook-2s")
			free(t, check, calls[3].claim)
			free(t, check, calls[4].claim)
		})
	}
}

// TestGroupCommitLostReply: a round whose reply is lost is sent once
// (T5): every call in it fails with ErrTimeout at its own deadline, none
// is sent again, and each of their claims was settled once. Through a
// proxy that drops the replies: a Commit with a 1s deadline, then 8 more
// (3s) queued behind it; when the first times out the 8 go as one round,
// whose reply is lost too. The servers run two settle script calls.
func TestGroupCommitLostReply(t *testing.T) {
	t.Parallel()
	for _, d := range drivers {
		t.Run(d.scheme, func(t *testing.T) {
			t.Parallel()
			srv := testserver.StartRedis(t, testserver.Binary(d.bin))
			p := nettest.NewProxy(t, srv.Addr, nil)
			// A budget above the calls' deadlines, and short: the driver's
			// background check of the server's settings may be waiting for
			// a lost reply too, and Close waits for it.
			st, prefix, tenant := openWarm(t, d.scheme+"://"+p.Addr(), fleetstore.WithTimeout(4*time.Second))
			// go-redis closes the connection of a call that timed out: the
			// round goes on another, whose handshake's reply would be lost.
			warmConns(t, st, srv)
			waitLibrary(t, srv)

			before := scriptCalls(t, srv)
			p.DropReplies(true)
			const n = 8
			claims := make([]fleetstore.Claim, n+1)
			errs := make([]error, n+1)
			took := make([]time.Duration, n+1)
			var wg sync.WaitGroup
			for i := range claims {
				claims[i] = newClaim(tenant, fmt.Sprintf("hook-%d", i))
				deadline := 3 * time.Second
				if i == 0 {
					deadline = time.Second
				}
				wg.Go(func() {
					if i > 0 {
						time.Sleep(100 * time.Millisecond)
					}
					t0 := time.Now()
					errs[i] = st.Commit(gctx(t, deadline), claims[i])
					took[i] = time.Since(t0)
					if took[i] > deadline+300*time.Millisecond {
						t.Errorf("commit %d took %v, deadline %v", i, took[i], deadline)
					}
				})
			}
			wg.Wait()
			p.DropReplies(false)
			for i, err := range errs {
				if !errors.Is(err, fleetstore.ErrTimeout) {
					t.Errorf("commit %d whose reply was lost: %v, want ErrTimeout", i, err)
				}
			}
			calls := scriptCalls(t, srv) - before
			t.Logf("FIGURE group commit lost reply: %d script calls for %d commits", calls, n+1)
			if calls != 2 {
				t.Errorf("%d settle script calls, want 2 (the first alone, then one round): a call was "+
					"re-sent, or the round was not one", calls)
			}
			check := reopen(t, d.scheme+"://"+srv.Addr, prefix)
			for i, c := range claims {
				committedBy(t, check, c, fmt.Sprintf("hook-%d", i))
			}
		})
	}
}

// TestSettleOneCallPerSlot: a Commit of claims of three tenants, after a
// first one that loads the script, is one settle script call on a single
// server (the Valkey driver too, once its client knows the server is no
// cluster node), and one per tenant on a cluster, where each tenant is
// its own slot. Fails with the Valkey driver splitting by tenant always.
func TestSettleOneCallPerSlot(t *testing.T) {
	t.Parallel()
	onServerAndCluster(t, func(t *testing.T, raw string, cluster bool, servers ...*testserver.Redis) {
		want := 1 // one server: one call for every tenant
		if cluster {
			want = 3 // one per tenant, each its own slot
		}
		testSettleCalls(t, raw, want, servers...)
	})
}

func testSettleCalls(t *testing.T, raw string, want int, servers ...*testserver.Redis) {
	st, _ := openGroup(t, raw)
	tenants := []string{"ta-" + randHex(3), "tb-" + randHex(3), "tc-" + randHex(3)}
	var batch []fleetstore.Claim
	for i := range 6 {
		batch = append(batch, newClaim(tenants[i%3], "h"))
	}
	// The client built, the library loaded on every server the tenants are on.
	if err := st.Commit(gctx(t, 5*time.Second), batch[:3]...); err != nil {
		t.Fatal(err)
	}
	batch = batch[3:]
	waitLibrary(t, servers...)
	before := scriptCalls(t, servers...)
	if err := st.Commit(gctx(t, 5*time.Second), batch...); err != nil {
		t.Fatal(err)
	}
	if got := scriptCalls(t, servers...) - before; got != want {
		t.Errorf("a Commit of claims of 3 tenants made %d script calls, want %d", got, want)
	}
	for _, c := range batch {
		committedBy(t, st, c, "h")
	}
}

// TestLargeSettleNotQueued: a Commit of more claims than a round takes
// from one call (a replay's batch) does not wait for the round in
// flight: with the server stopped (SIGSTOP) and a one-claim Commit in
// flight, a Commit of 20 claims with a 0.5s deadline times out, but its
// claims were sent at once: once the server runs again they are
// committed. Queued, they would have been taken out of the queue unsent
// at its deadline.
func TestLargeSettleNotQueued(t *testing.T) {
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
			defer func() {
				if !thawed {
					_ = srv.Thaw()
				}
			}()
			first := make(chan error, 1)
			go func() { first <- st.Commit(gctx(t, 5*time.Second), newClaim(tenant, "first")) }()
			time.Sleep(200 * time.Millisecond)
			var batch []fleetstore.Claim
			for range 20 {
				batch = append(batch, newClaim(tenant, "big"))
			}
			if err := st.Commit(gctx(t, 500*time.Millisecond), batch...); !errors.Is(err, fleetstore.ErrTimeout) {
				t.Errorf("commit of 20 claims against a stopped server: %v, want ErrTimeout", err)
			}
			thawed = true
			if err := srv.Thaw(); err != nil {
				t.Fatal(err)
			}
			if err := <-first; err != nil {
				t.Errorf("first commit: %v", err)
			}
			check := reopen(t, raw, prefix)
			for _, c := range batch {
				committedBy(t, check, c, "big")
			}
		})
	}
}

// onServerAndCluster runs test, in parallel, against each driver on one
// server and on a cluster of three masters: raw is the Store's URL,
// cluster says which, servers are the nodes.
func onServerAndCluster(t *testing.T, test func(t *testing.T, raw string, cluster bool, servers ...*testserver.Redis)) {
	for _, d := range drivers {
		t.Run(d.scheme+"/server", func(t *testing.T) {
			t.Parallel()
			srv := testserver.StartRedis(t, testserver.Binary(d.bin))
			test(t, d.scheme+"://"+srv.Addr, false, srv)
		})
		t.Run(d.scheme+"/cluster", func(t *testing.T) {
			t.Parallel()
			cl := testserver.StartCluster(t, testserver.Binary(d.bin))
			test(t, cl.URLScheme(d.scheme), true, cl.Nodes...)
		})
	}
}

// TestSettleScriptErrorOwn: one call's script error is its own in a round
// of settles alone too. A claim's record is malformed (another program's
// value under the prefix: an error reply, V4); with the server stopped
// (SIGSTOP) and a Commit in flight, a Commit of that claim and then one of
// a good claim of the same tenant queue and go in one round. The first
// fails with the error reply; the second is committed, as it would be
// alone. Fails when the round's Commits share one settle script call,
// which the first's error ends for both.
func TestSettleScriptErrorOwn(t *testing.T) {
	t.Parallel()
	for _, d := range drivers {
		t.Run(d.scheme, func(t *testing.T) {
			t.Parallel()
			srv := testserver.StartRedis(t, testserver.Binary(d.bin))
			raw := d.scheme + "://" + srv.Addr
			st, prefix, tenant := openWarm(t, raw)
			warmConns(t, st, srv)
			waitLibrary(t, srv)
			bad, good := newClaim(tenant, "ha"), newClaim(tenant, "hb")
			dg := scripts.ClaimDigest(bad.SourceID, bad.Key)
			if _, err := srv.Do("HSET", scripts.ShardKey(prefix, tenant, 0), string(dg[:]), "garbage"); err != nil {
				t.Fatal(err)
			}
			before := scriptCalls(t, srv)
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
			var wg sync.WaitGroup
			var errFirst, errBad, errGood error
			wg.Go(func() { errFirst = st.Commit(gctx(t, 10*time.Second), newClaim(tenant, "first")) })
			time.Sleep(200 * time.Millisecond)
			wg.Go(func() { errBad = st.Commit(gctx(t, 10*time.Second), bad) })
			time.Sleep(100 * time.Millisecond)
			wg.Go(func() { errGood = st.Commit(gctx(t, 10*time.Second), good) })
			time.Sleep(200 * time.Millisecond)
			thaw()
			wg.Wait()
			if errFirst != nil {
				t.Fatalf("the Commit in flight: %v", errFirst)
			}
			if got := scriptCalls(t, srv) - before; got != 2 {
				t.Fatalf("%d script calls, want 2: the Commit in flight, then one round", got)
			}
			if !errors.Is(errBad, fleetstore.ErrUnavailable) || !strings.Contains(errBad.Error(), "malformed claim record") {
				t.Errorf("Commit of the malformed record: %v, want the error reply", errBad)
			}
			if errGood != nil {
				t.Errorf("Commit of a good claim in the same round: %v, want nil", errGood)
			}
			committedBy(t, st, good, "hb")
		})
	}
}
