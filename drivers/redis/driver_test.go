package redis

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/internal/scripts"
	"github.com/fleetstore/fleetstore/internal/testing/testserver"
)

func hooks(tenant string) fleetstore.Charge {
	return fleetstore.Charge{Kind: fleetstore.Hooks, Tenant: tenant, Increment: time.Second, Capacity: time.Minute}
}

func bytesCharge(tenant string) fleetstore.Charge {
	return fleetstore.Charge{Kind: fleetstore.Bytes, Tenant: tenant, Increment: 125 * time.Microsecond, Capacity: time.Second}
}

func claim(tenant, source, key, hook string) *fleetstore.Claim {
	return &fleetstore.Claim{Tenant: tenant, SourceID: source, Key: key, HookID: hook, Node: "node-1",
		TTL: time.Hour, PendingTTL: time.Minute}
}

func mustHit(t *testing.T, st *fleetstore.Store, charges []fleetstore.Charge, cl *fleetstore.Claim, want fleetstore.Outcome) fleetstore.Result {
	t.Helper()
	res, err := st.Hit(ctx(t), charges, cl)
	if err != nil {
		t.Fatalf("hit: %v", err)
	}
	if res.Outcome != want {
		t.Fatalf("hit: got %v, want %v", res, want)
	}
	return res
}

// wantDuplicate wants a Hit of c's claim by another hook answered
// Duplicate naming c's hook_id, its committer (C4).
func wantDuplicate(t *testing.T, st *fleetstore.Store, c fleetstore.Claim) {
	t.Helper()
	committer := c.HookID
	c.HookID = "redelivery-of-" + committer[:min(len(committer), 200)]
	if res := mustHit(t, st, nil, &c, fleetstore.Duplicate); res.HookID != committer {
		t.Errorf("claim on %q: Duplicate names %q, want %q", c.Key, res.HookID, committer)
	}
}

// TestOneScriptCallPerHit counts FCALL in INFO commandstats: one per
// Hit, and no EVALSHA or EVAL once the library is loaded.
func TestOneScriptCallPerHit(t *testing.T) {
	t.Parallel()
	srv := testserver.StartRedis(t)
	st, _ := openStore(t, srv.URL())
	tenant := "t-" + randHex(4)
	mustHit(t, st, []fleetstore.Charge{hooks(tenant)}, nil, fleetstore.OK) // connect, load
	waitLibrary(t, srv)
	before, err := srv.Info("commandstats")
	if err != nil {
		t.Fatal(err)
	}
	const n = 25
	for i := range n {
		cl := claim(tenant, "github", "evt-"+randHex(4), "hook-"+randHex(4))
		if i%5 == 4 { // a Hit with a claim only
			mustHit(t, st, nil, cl, fleetstore.OK)
			continue
		}
		mustHit(t, st, []fleetstore.Charge{hooks(tenant), bytesCharge(tenant)}, cl, fleetstore.OK)
	}
	after, err := srv.Info("commandstats")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmdStat(after, "fcall") - cmdStat(before, "fcall"); d != n {
		t.Errorf("%d FCALL for %d hits", d, n)
	}
	for _, cmd := range []string{"evalsha", "eval"} {
		if d := cmdStat(after, cmd) - cmdStat(before, cmd); d != 0 {
			t.Errorf("%d %s for %d hits with the library loaded", d, cmd, n)
		}
	}
}

// TestScriptFlushAndRestartInvisible: SCRIPT FLUSH with FUNCTION FLUSH,
// and a server restart, between two calls cost the caller nothing (T5): a
// missing function is answered with EVAL and a load of the library, after
// which calls are FCALL again; a dead pooled connection is replaced.
func TestScriptFlushAndRestartInvisible(t *testing.T) {
	t.Parallel()
	srv := testserver.StartRedis(t)
	st, _ := openStore(t, srv.URL())
	tenant := "t-" + randHex(4)
	mustHit(t, st, []fleetstore.Charge{hooks(tenant)}, nil, fleetstore.OK)
	waitLibrary(t, srv)

	if err := srv.FlushScripts(); err != nil {
		t.Fatal(err)
	}
	before, _ := srv.Info("commandstats")
	mustHit(t, st, []fleetstore.Charge{hooks(tenant)}, claim(tenant, "s", "k1", "h1"), fleetstore.OK)
	waitLibrary(t, srv)
	if err := st.Commit(ctx(t), *claim(tenant, "s", "k1", "h1")); err != nil {
		t.Fatalf("commit after flush: %v", err)
	}
	after, _ := srv.Info("commandstats")
	for cmd, want := range map[string]int{"fcall": 2, "eval": 1, "evalsha": 0} {
		if d := cmdStat(after, cmd) - cmdStat(before, cmd); d != want {
			t.Errorf("%d %s for a Hit and a Commit after the flush, want %d (FCALL of each; "+
				"EVAL of the Hit, whose function was missing)", d, cmd, want)
		}
	}

	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	mustHit(t, st, []fleetstore.Charge{hooks(tenant)}, nil, fleetstore.OK)
	if err := st.Commit(ctx(t), *claim(tenant, "s", "k2", "h2")); err != nil {
		t.Fatalf("commit after restart: %v", err)
	}
	if err := st.Reset(ctx(t), tenant); err != nil {
		t.Fatalf("reset after restart: %v", err)
	}
}

// TestEveryKeyHasExpiry: after a run of hits, commits and releases on a
// server and a cluster, every key under the prefix has an expiry (G7).
func TestEveryKeyHasExpiry(t *testing.T) {
	t.Parallel()
	t.Run("server", func(t *testing.T) {
		t.Parallel()
		srv := testserver.StartRedis(t)
		testEveryKeyHasExpiry(t, srv.URL(), adminClient(t, "", srv.Addr))
	})
	t.Run("cluster", func(t *testing.T) {
		t.Parallel()
		cl := testserver.StartCluster(t)
		testEveryKeyHasExpiry(t, cl.URL(), adminClient(t, "", cl.Addrs()...))
	})
}

func testEveryKeyHasExpiry(t *testing.T, raw string, admin goredis.UniversalClient) {
	st, prefix := openStore(t, raw)
	var commits, releases []fleetstore.Claim
	for i := range 40 {
		tenant := "t" + randHex(3)
		cl := claim(tenant, "src", "evt-"+randHex(4), "hook-"+randHex(4))
		// A bucket hash lives a minute: every one is still there when the
		// keys are listed, however long the calls take.
		slow := fleetstore.Charge{Kind: fleetstore.Hooks, Tenant: tenant, Increment: time.Minute,
			Capacity: time.Hour}
		mustHit(t, st, []fleetstore.Charge{slow, bytesCharge(tenant)}, cl, fleetstore.OK)
		switch i % 3 {
		case 0:
			commits = append(commits, *cl)
		case 1:
			releases = append(releases, *cl)
		}
		// A commit of a claim never hit.
		commits = append(commits, *claim(tenant, "src", "never-hit-"+randHex(4), "hook-x"))
	}
	if err := st.Commit(ctx(t), commits...); err != nil {
		t.Fatalf("commit: %v", err)
	}
	if err := st.Release(ctx(t), releases...); err != nil {
		t.Fatalf("release: %v", err)
	}
	recs, err := keysUnder(ctx(t), admin, prefix+":*")
	if err != nil {
		t.Fatal(err)
	}
	// 40 bucket hashes, 27 committed + 13 pending claims from hits, 40 commits never hit.
	if len(recs) != 40+40-len(releases)+40 {
		t.Errorf("%d keys under %s, want %d", len(recs), prefix, 40+40-len(releases)+40)
	}
	for _, r := range recs {
		if r.TTL <= 0 {
			t.Errorf("key %q has no expiry (PTTL %v)", r.Key, r.TTL)
		}
		if r.TTL > time.Hour {
			t.Errorf("key %q expires in %v, after its longest TTL", r.Key, r.TTL)
		}
	}
}

// TestTenantsSpreadOverCluster: 1000 tenants' keys land on all three
// masters, and each tenant's bucket and claims share one slot (a Hit
// with a claim would fail with CROSSSLOT otherwise).
func TestTenantsSpreadOverCluster(t *testing.T) {
	t.Parallel()
	cl := testserver.StartCluster(t)
	st, prefix := openStore(t, cl.URL())
	var wg sync.WaitGroup
	errs := make(chan error, 1000)
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < 1000; i += 8 {
				tenant := "tenant-" + randHex(4)
				c := claim(tenant, "src", "evt", "hook")
				res, err := st.Hit(ctx(t), []fleetstore.Charge{hooks(tenant)}, c)
				if err == nil && res.Outcome != fleetstore.OK {
					err = errors.New("hit: " + res.Outcome.String())
				}
				if err == nil {
					err = st.Commit(ctx(t), *c)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, n := range cl.Nodes {
		v, err := n.Do("SCAN", "0", "MATCH", prefix+":*", "COUNT", "100000")
		if err != nil {
			t.Fatal(err)
		}
		keys := v.([]any)[1].([]any)
		t.Logf("master %s holds %d keys", n.Addr, len(keys))
		if len(keys) < 200 {
			t.Errorf("master %s holds %d of 2000 keys", n.Addr, len(keys))
		}
	}
}

// TestKeysInjective: tenants, sources and keys with ':', braces, NUL and
// newlines never meet (V2), on a cluster where braces would also change
// the slot.
func TestKeysInjective(t *testing.T) {
	t.Parallel()
	cl := testserver.StartCluster(t)
	st, _ := openStore(t, cl.URL())
	r := randHex(3)
	cases := []struct{ tenant, source, key string }{
		{"a:b" + r, "c", "k"},
		{"a", "b:c" + r, "k"},
		{"a:b:c" + r, "", "k"}, // source set below
		{"{x}" + r, "s", "k"},
		{"x" + r, "}{", "k"},
		{"nul\x00" + r, "s\x00", "k\x00"},
		{"nl\n" + r, "s\n", "k\r\n"},
		{"%41" + r, "s", "k"},
		{"A" + r, "s", "k"},
		{strings.Repeat("é", 512), "s" + r, strings.Repeat("}", 1024)},
	}
	cases[2].source = "s"
	for i, c := range cases {
		cl := claim(c.tenant, c.source, c.key, "hook-"+string(rune('a'+i)))
		mustHit(t, st, []fleetstore.Charge{{Kind: "hooks", Tenant: c.tenant, Increment: time.Hour, Capacity: time.Hour}}, cl, fleetstore.OK)
		if err := st.Commit(ctx(t), *cl); err != nil {
			t.Fatalf("case %d: commit: %v", i, err)
		}
	}
	// Every tenant's one-unit bucket is now empty, every claim committed by
	// its own hook: a collision would show another case's hook or bucket.
	for i, c := range cases {
		res := mustHit(t, st, nil, claim(c.tenant, c.source, c.key, "other"), fleetstore.Duplicate)
		if want := "hook-" + string(rune('a'+i)); res.HookID != want {
			t.Errorf("case %d: duplicate of %q, want %q", i, res.HookID, want)
		}
		mustHit(t, st, []fleetstore.Charge{{Kind: "hooks", Tenant: c.tenant, Increment: time.Hour, Capacity: time.Hour}}, nil, fleetstore.RateLimited)
	}
	if scripts.Encode("a:b") == scripts.Encode("a%3Ab") {
		t.Fatal("encoding not injective")
	}
}

// TestBatchSettleRoundTrips: a Commit of many claims is one script call
// on a server, and one per tenant on a cluster; each claim gets its own
// result (C10).
func TestBatchSettleRoundTrips(t *testing.T) {
	t.Parallel()
	t.Run("server", func(t *testing.T) {
		t.Parallel()
		srv := testserver.StartRedis(t)
		testBatchSettle(t, srv.URL(), []*testserver.Redis{srv}, 1)
	})
	t.Run("cluster", func(t *testing.T) {
		t.Parallel()
		cl := testserver.StartCluster(t)
		testBatchSettle(t, cl.URL(), cl.Nodes, 5)
	})
}

func testBatchSettle(t *testing.T, raw string, nodes []*testserver.Redis, wantCalls int) {
	st, _ := openStore(t, raw)
	var claims []fleetstore.Claim
	tenants := make([]string, 5)
	for i := range tenants {
		tenants[i] = "t-" + randHex(4)
	}
	for i := range 30 {
		c := claim(tenants[i%5], "src", "evt-"+randHex(4), "hook-a")
		mustHit(t, st, nil, c, fleetstore.OK)
		claims = append(claims, *c)
	}
	// Two of them are lost to another hook: they were held by hook-b.
	lost := []int{3, 17}
	for _, i := range lost {
		claims[i].HookID = "hook-b"
	}
	waitLibrary(t, nodes...)
	stats := func() int {
		n := 0
		for _, node := range nodes {
			info, err := node.Info("commandstats")
			if err != nil {
				t.Fatal(err)
			}
			n += cmdStat(info, "fcall") + cmdStat(info, "evalsha") + cmdStat(info, "eval")
		}
		return n
	}
	before := stats()
	err := st.Commit(ctx(t), claims...)
	if got := stats() - before; got != wantCalls {
		t.Errorf("%d script calls for a commit of %d claims over 5 tenants, want %d", got, len(claims), wantCalls)
	}
	wantErrIs(t, "commit with two lost claims", err, fleetstore.ErrClaimLost)
	for _, i := range lost {
		if !strings.Contains(err.Error(), "claims["+itoa(i)+"]") {
			t.Errorf("error does not name claims[%d]: %v", i, err)
		}
	}
	if n := strings.Count(err.Error(), "claim lost"); n != 2 {
		t.Errorf("%d claims lost in %v, want 2", n, err)
	}
	for i, c := range claims {
		want := fleetstore.Duplicate
		if i == 3 || i == 17 {
			want = fleetstore.Pending // still pending for hook-a
		}
		mustHit(t, st, nil, claim(c.Tenant, c.SourceID, c.Key, "hook-z"), want)
	}
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}

// TestMalformedClaimRecord: a claim key holding something the scripts did
// not write is an error, not a decision and not a panic (V4).
func TestMalformedClaimRecord(t *testing.T) {
	t.Parallel()
	srv := testserver.StartRedis(t)
	st, prefix := openStore(t, srv.URL())
	c := claim("t", "s", "k", "h")
	for _, v := range []string{"garbage", "", "c", "q", "x003abc", "p003abc", "c" + strings.Repeat("h", 257),
		"q1234567890123456", "q123456789012345xhook", "q 234567890123456hook", "q0x34567890123456hook",
		"q1e15000000000000hook", "q-234567890123456hook", "q1234567890123456" + strings.Repeat("h", 257)} {
		if _, err := srv.Do("SET", scripts.ClaimKey(prefix, c.Tenant, c.SourceID, c.Key), v, "EX", "60"); err != nil {
			t.Fatal(err)
		}
		_, err := st.Hit(ctx(t), nil, c)
		wantErrIs(t, "hit on "+v, err, fleetstore.ErrUnavailable)
		err = st.Commit(ctx(t), *c)
		wantErrIs(t, "commit on "+v, err, fleetstore.ErrUnavailable)
	}
	// The same records as a field of the claim's shard, and a shard state
	// that is not the digits the script writes.
	if _, err := srv.Do("DEL", scripts.ClaimKey(prefix, c.Tenant, c.SourceID, c.Key)); err != nil {
		t.Fatal(err)
	}
	d := scripts.ClaimDigest(c.SourceID, c.Key)
	for _, v := range []string{"garbage", "", "c", "c123", "x1234567890123456hook", "q 234567890123456hook"} {
		if _, err := srv.Do("HSET", scripts.ShardKey(prefix, c.Tenant, 0), string(d[:]), v); err != nil {
			t.Fatal(err)
		}
		_, err := st.Hit(ctx(t), nil, c)
		wantErrIs(t, "hit on field "+v, err, fleetstore.ErrUnavailable)
		err = st.Commit(ctx(t), *c)
		wantErrIs(t, "commit on field "+v, err, fleetstore.ErrUnavailable)
	}
	// A shard 0 of the wrong type, likewise.
	s0 := scripts.ShardKey(prefix, "t2", 0)
	if _, err := srv.Do("SET", s0, "x", "EX", "60"); err != nil {
		t.Fatal(err)
	}
	_, err := st.Hit(ctx(t), []fleetstore.Charge{hooks("t2")}, nil)
	wantErrIs(t, "hit on a string shard 0", err, fleetstore.ErrUnavailable)
	// A TAT that is not the digits the script writes.
	for _, v := range []string{"garbage", "", "0x10", "  5", "-99999999999999999", "1e15", "1.5"} {
		if _, err := srv.Do("DEL", s0); err != nil {
			t.Fatal(err)
		}
		if _, err := srv.Do("HSET", s0, scripts.TATField("hooks"), v); err != nil {
			t.Fatal(err)
		}
		_, err := st.Hit(ctx(t), []fleetstore.Charge{hooks("t2")}, nil)
		wantErrIs(t, "hit on a bucket TAT of "+strconv.Quote(v), err, fleetstore.ErrUnavailable)
	}
}

// TestLargeValues: TATs near 366 days ahead and 125µs increments keep
// integer precision in the script (G9; Lua numbers are doubles).
func TestLargeValues(t *testing.T) {
	t.Parallel()
	srv := testserver.StartRedis(t)
	st, prefix := openStore(t, srv.URL())
	day := 24 * time.Hour
	big := fleetstore.Charge{Kind: "big", Tenant: "t", Increment: 183*day + 7*time.Microsecond, Capacity: 366 * day}
	mustHit(t, st, []fleetstore.Charge{big}, nil, fleetstore.OK)
	mustHit(t, st, []fleetstore.Charge{big}, nil, fleetstore.OK)
	res := mustHit(t, st, []fleetstore.Charge{big}, nil, fleetstore.RateLimited)
	if res.RetryAfter < 183*day-time.Minute || res.RetryAfter > 183*day+time.Minute {
		t.Errorf("retry after %v, want about 183 days", res.RetryAfter)
	}
	s0 := scripts.ShardKey(prefix, "t", 0)
	v, err := srv.Do("HGET", s0, scripts.TATField("big"))
	if err != nil {
		t.Fatal(err)
	}
	s := v.(string)
	if strings.ContainsAny(s, "e.") || len(s) != 16 {
		t.Fatalf("stored TAT %q: want 16 integer digits (µs)", s)
	}
	ttl, err := srv.Do("PTTL", s0)
	if err != nil {
		t.Fatal(err)
	}
	if got := time.Duration(ttl.(int64)) * time.Millisecond; got < 366*day-time.Minute || got > 366*day+2*time.Second {
		t.Errorf("shard 0 expires in %v, want 366 days (its TAT) and at most a SLACK more", got)
	}
	// A committed claim of 366 days.
	c := claim("t", "s", "k", "h")
	c.TTL = 366 * day
	if err := st.Commit(ctx(t), *c); err != nil {
		t.Fatal(err)
	}
	ttl, _ = srv.Do("PTTL", scripts.ShardKey(prefix, "t", 0))
	if got := time.Duration(ttl.(int64)) * time.Millisecond; got < 366*day-time.Minute {
		t.Errorf("claim expires in %v, want 366 days", got)
	}
}

var _ = context.Background
