package redis

import (
	_ "embed"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/internal/scripts"
	"github.com/fleetstore/fleetstore/internal/testserver"
)

// The version before's scripts (d593f01's internal/scripts claim.lua,
// settle.lua and hit.lua), put together as that version loaded them:
// claim.lua, a newline, the script.
var (
	//go:embed testdata/d593f01_claim.lua
	oldClaimLua string
	//go:embed testdata/d593f01_settle.lua
	oldSettleBody string
	//go:embed testdata/d593f01_hit.lua
	oldHitBody   string
	oldSettleLua = oldClaimLua + "\n" + oldSettleBody
	oldHitLua    = oldClaimLua + "\n" + oldHitBody
)

// oldCommit commits claims with the version before's settle script: an
// authentic old-layout tenant.
func oldCommit(t *testing.T, admin goredis.UniversalClient, prefix string, claims ...fleetstore.Claim) {
	t.Helper()
	keys, args := scripts.SettleCall(prefix, true, claims)
	if _, err := evalOld(t, admin, oldSettleLua, keys, args); err != nil {
		t.Fatalf("old settle: %v", err)
	}
}

// evalOld runs one of the version before's scripts (EVAL) over keys and
// args as the scripts package builds them.
func evalOld(t *testing.T, admin goredis.UniversalClient, src string, keys, args []string) (any, error) {
	t.Helper()
	a := make([]any, len(args))
	for i := range args {
		a[i] = args[i]
	}
	return admin.Eval(ctx(t), src, keys, a...).Result()
}

// TestUpgradeFullOneBucketTenant: a one-bucket tenant of the version
// before whose shard 0 holds 120 fields (what that version leaves whenever
// it has just filled shard 0) is split by this version's first write,
// which moves every record out of shard 0 (deleting the key: it had no
// state field yet). Shard 0 must still be given an expiry covering the
// moved records, not only the new one's: else once it expires its state
// (l = 1) is gone, the moved claims are looked up in shard 0 and a
// redelivery is answered OK (C4, C9). Found by review; failed before.
func TestUpgradeFullOneBucketTenant(t *testing.T) {
	srv := testserver.StartRedis(t)
	st, prefix := openStore(t, srv.URL())
	admin := adminClient(t, "", srv.Addr)
	tenant := "t-" + randHex(4)
	var old []fleetstore.Claim
	for i := range 120 {
		old = append(old, *claim(tenant, "github", "old-"+strconv.Itoa(i), "hook-old-"+strconv.Itoa(i)))
	}
	oldCommit(t, admin, prefix, old...)
	s0 := scripts.ShardKey(prefix, tenant, 0)
	if n, _ := admin.HLen(ctx(t), s0).Result(); n != 120 {
		t.Fatalf("old shard 0 holds %d fields, want 120", n)
	}
	// The new version's first write: a Hit with a short pending TTL.
	nc := claim(tenant, "github", "new", "hook-new")
	nc.PendingTTL = time.Second
	mustHit(t, st, nil, nc, fleetstore.OK)
	ttl, _ := admin.PTTL(ctx(t), s0).Result()
	t.Logf("after the first new write: shard 0 expires in %v; the old claims in an hour", ttl)
	time.Sleep(3 * time.Second)
	lost := 0
	for _, c := range old {
		other := c
		other.HookID = "redelivery"
		res, err := st.Hit(ctx(t), nil, &other)
		if err != nil {
			t.Fatal(err)
		}
		if res.Outcome != fleetstore.Duplicate || res.HookID != c.HookID {
			lost++
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d claims committed for an hour answered other than Duplicate 3s later", lost, len(old))
	}
}

// TestSplitOfExpiredBucketKeepsExpiries: a split of bucket p whose shard
// has expired (its records all did) must not create that shard again with
// its state field alone and no expiry (CONTRACT §7: every write sets an
// expiry; the drivers' Records hooks skip a shard's state field, so the
// conformance suite cannot see such a key). Found by review; failed
// before.
func TestSplitOfExpiredBucketKeepsExpiries(t *testing.T) {
	srv := testserver.StartRedis(t)
	st, prefix := openStore(t, srv.URL())
	admin := adminClient(t, "", srv.Addr)
	tenant := "t-" + randHex(4)
	s0 := scripts.ShardKey(prefix, tenant, 0)
	n := 0
	next := func(bucket int, ttl time.Duration) fleetstore.Claim {
		for {
			c := claim(tenant, "github", "k-"+strconv.Itoa(n), "hook-"+strconv.Itoa(n))
			n++
			if shardOf(scripts.ClaimDigest(c.SourceID, c.Key), 1, 0) == bucket {
				c.TTL = ttl
				return *c
			}
		}
	}
	// Bucket 0 short-lived, bucket 1 long-lived, until the first split.
	for i := 0; ; i++ {
		if l, _, _, _ := tenantState(t, admin, s0); l == 1 {
			break
		}
		var c fleetstore.Claim
		if i%2 == 0 {
			c = next(0, 300*time.Millisecond)
		} else {
			c = next(1, time.Hour)
		}
		if err := st.Commit(ctx(t), c); err != nil {
			t.Fatal(err)
		}
	}
	s1 := scripts.ShardKey(prefix, tenant, 1)
	time.Sleep(2 * time.Second) // shard 1 (bucket 0) expires: 300ms + SLACK
	if e, _ := admin.Exists(ctx(t), s1).Result(); e != 0 {
		t.Fatalf("shard 1 still exists")
	}
	// Fill bucket 1 (shard 2) until bucket p = 0 splits.
	for {
		if _, p, _, _ := tenantState(t, admin, s0); p == 1 {
			break
		}
		if err := st.Commit(ctx(t), next(1, time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	keys, err := admin.Keys(ctx(t), scripts.TenantPattern(prefix, tenant)).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		ttl, _ := admin.PTTL(ctx(t), k).Result()
		if ttl < 0 {
			kv, _ := admin.HGetAll(ctx(t), k).Result()
			t.Errorf("key %q has no expiry (PTTL %v); fields %q", k, ttl, kv)
		}
	}
}

// TestMalformedOldRecordExpiry: a record in the version before's format
// ('C'/'q', 16 digits) whose expiry no version can have written (beyond
// three 366-day TTLs, or past 2^53 µs where tonumber rounds) is an error,
// never a decision (V4), as it is in the binary format. Found by review.
func TestMalformedOldRecordExpiry(t *testing.T) {
	t.Parallel()
	srv := testserver.StartRedis(t)
	st, prefix := openStore(t, srv.URL())
	admin := adminClient(t, "", srv.Addr)
	far := time.Now().Add(4 * 366 * 24 * time.Hour).UnixMicro()
	for i, v := range []string{"C" + fmt.Sprintf("%016d", far) + "h", "C9999999999999999h", "q" + fmt.Sprintf("%016d", far) + "h"} {
		wantRefused(t, st, admin, prefix, "t-"+strconv.Itoa(i), "", v)
	}
}

// TestUpgradeShortKeyPendingCommitted: a pending claim of the version
// before at the short key (q, a hook_id of 48–56 bytes: too long for that
// version's field, short enough for this one's) committed by its hook: the
// commit goes to the field, and the old record must go from the short key,
// else once the commit's TTL has passed (shorter than the pending time
// left) the claim reads as pending again instead of free (C9). Found by
// review; failed before.
func TestUpgradeShortKeyPendingCommitted(t *testing.T) {
	srv := testserver.StartRedis(t)
	st, prefix := openStore(t, srv.URL())
	admin := adminClient(t, "", srv.Addr)
	tenant := "t-" + randHex(4)
	hook := "h" + strings.Repeat("x", 49) // 50 bytes
	c := claim(tenant, "github", "evt", hook)
	short := scripts.ClaimKey(prefix, tenant, c.SourceID, c.Key)
	exp := serverMicros(t, admin) + time.Hour.Microseconds()
	if err := admin.Set(ctx(t), short, "q"+fmt.Sprintf("%016d", exp)+hook, time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	c.TTL = 500 * time.Millisecond
	if err := st.Commit(ctx(t), *c); err != nil {
		t.Fatal(err)
	}
	other := *c
	other.HookID = "other"
	mustHit(t, st, nil, &other, fleetstore.Duplicate)
	time.Sleep(time.Second)
	res, err := st.Hit(ctx(t), nil, &other)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != fleetstore.OK {
		t.Errorf("commit TTL 500ms passed 1s ago: Hit %v (retry-after %v), want OK", res.Outcome, res.RetryAfter)
	}
}

// oldHit takes a pending claim with the version before's hit script.
func oldHit(t *testing.T, admin goredis.UniversalClient, prefix string, c *fleetstore.Claim) int64 {
	t.Helper()
	keys, args := scripts.HitCall(prefix, nil, c)
	v, err := evalOld(t, admin, oldHitLua, keys, args)
	if err != nil {
		t.Fatalf("old hit: %v", err)
	}
	return v.([]any)[0].(int64)
}

// TestSkewedKeysKeepExpiries: claims whose digests share their low bits
// (event ids chosen for it) all land in one bucket, so each insert into
// its full shard splits another, mostly empty, bucket: no key may be left
// without an expiry, the hot shard stays a listpack, and every claim still
// answers Duplicate.
func TestSkewedKeysKeepExpiries(t *testing.T) {
	srv := testserver.StartRedis(t)
	st, prefix := openStore(t, srv.URL())
	admin := adminClient(t, "", srv.Addr)
	tenant := "t-" + randHex(4)
	var batch []fleetstore.Claim
	for i := 0; len(batch) < 1000; i++ {
		k := "evt-" + strconv.Itoa(i)
		d := scripts.ClaimDigest("github", k)
		if shardOf(d, 9, 0) == 0 {
			batch = append(batch, *claim(tenant, "github", k, "hook-"+strconv.Itoa(i)))
		}
	}
	for i := 0; i < len(batch); i += 50 {
		if err := st.Commit(ctx(t), batch[i:i+50]...); err != nil {
			t.Fatal(err)
		}
	}
	keys, _ := admin.Keys(ctx(t), scripts.TenantPattern(prefix, tenant)).Result()
	noTTL, biggest, big := 0, int64(0), ""
	for _, k := range keys {
		if ttl, _ := admin.PTTL(ctx(t), k).Result(); ttl == -1 {
			noTTL++
		}
		if n, _ := admin.HLen(ctx(t), k).Result(); n > biggest {
			biggest, big = n, k
		}
	}
	enc, _ := admin.ObjectEncoding(ctx(t), big).Result()
	l, p, _, _ := tenantState(t, admin, scripts.ShardKey(prefix, tenant, 0))
	t.Logf("1000 claims in one bucket: l %d p %d, %d keys, %d without expiry; biggest shard %d fields (%s)", l, p, len(keys), noTTL, biggest, enc)
	if noTTL > 0 {
		t.Errorf("%d of %d keys without expiry", noTTL, len(keys))
	}
	if enc != "listpack" {
		t.Errorf("the hot shard %q is a %s of %d fields", big, enc, biggest)
	}
	for _, c := range batch[:50] {
		wantDuplicate(t, st, c)
	}
}

// TestOldNodeRefusesNewRecord: a node of the version before, running its
// own hit script over a claim this version committed, gets an error (the
// 7-byte expiry is no record it knows), never a decision: a mixed fleet
// answers such a redelivery 503 on its old nodes (README, Upgrading).
func TestOldNodeRefusesNewRecord(t *testing.T) {
	t.Parallel()
	srv := testserver.StartRedis(t)
	st, prefix := openStore(t, srv.URL())
	admin := adminClient(t, "", srv.Addr)
	c := claim("t-"+randHex(4), "github", "evt", "hook-new")
	if err := st.Commit(ctx(t), *c); err != nil {
		t.Fatal(err)
	}
	other := *c
	other.HookID = "hook-old-node"
	keys, args := scripts.HitCall(prefix, nil, &other)
	v, err := evalOld(t, admin, oldHitLua, keys, args)
	if err == nil || !strings.Contains(err.Error(), "malformed claim record") {
		t.Errorf("old hit script over a new record: %v, %v; want the malformed-record error", v, err)
	}
}
