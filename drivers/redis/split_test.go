package redis

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/internal/scripts"
	"github.com/fleetstore/fleetstore/internal/testing/testserver"
)

// TestSplitOfExpiredBucketKeepsExpiries: a split of bucket p whose shard
// has expired (its records all did) must not create that shard again with
// its state field alone and no expiry (CONTRACT §7: every write sets an
// expiry; the drivers' Records hooks skip a shard's state field, so the
// conformance suite cannot see such a key).
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
		if l, _, _ := tenantState(t, admin, s0); l == 1 {
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
		if _, p, _ := tenantState(t, admin, s0); p == 1 {
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
	l, p, _ := tenantState(t, admin, scripts.ShardKey(prefix, tenant, 0))
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

// TestTATsBesideClaimsAcrossSplits: the TATs are fields of shard 0 beside
// its state and, while the tenant has one bucket, its records. A split of
// shard 0 moves the records alone: every charge still finds its TAT (each
// Hit's reset-after one increment more than the last), shard 0 ends with
// its state and its TAT, and every claim is still found.
func TestTATsBesideClaimsAcrossSplits(t *testing.T) {
	t.Parallel()
	srv := testserver.StartRedis(t)
	st, prefix := openStore(t, srv.URL())
	admin := adminClient(t, "", srv.Addr)
	tenant := "t-" + randHex(4)
	s0 := scripts.ShardKey(prefix, tenant, 0)
	charge := fleetstore.Charge{Kind: "hooks", Tenant: tenant, Increment: 10 * time.Minute, Capacity: 24 * time.Hour}
	var all []fleetstore.Claim
	start := time.Now()
	for round := 1; round <= 6; round++ {
		batch := make([]fleetstore.Claim, 60)
		for i := range batch {
			batch[i] = *claim(tenant, "github", "k-"+strconv.Itoa(len(all)+i), "hook-"+strconv.Itoa(len(all)+i))
		}
		if err := st.Commit(ctx(t), batch...); err != nil {
			t.Fatal(err)
		}
		all = append(all, batch...)
		c := claim(tenant, "github", "hit-"+strconv.Itoa(round), "hit-hook")
		res := mustHit(t, st, []fleetstore.Charge{charge}, c, fleetstore.OK)
		want := time.Duration(round) * 10 * time.Minute
		if got := res.Buckets[0].ResetAfter; got > want || got < want-time.Since(start)-time.Second {
			t.Fatalf("Hit %d: reset-after %v, want %v less the time since the first", round, got, want)
		}
		all = append(all, *c)
	}
	if l, _, _ := tenantState(t, admin, s0); l < 1 {
		t.Fatalf("%d claims, level %d: want shard 0 split", len(all), l)
	}
	fields, err := admin.HKeys(ctx(t), s0).Result()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(fields)
	if want := []string{scripts.TATField("hooks"), "s"}; !slices.Equal(fields, want) {
		t.Errorf("shard 0 of a split tenant holds %q, want %q", fields, want)
	}
	for _, i := range []int{0, 1, len(all) / 2, len(all) - 2, len(all) - 1} {
		o := all[i]
		o.HookID = "other"
		if i == len(all)-1 {
			mustHit(t, st, nil, &o, fleetstore.Pending)
			continue
		}
		wantDuplicate(t, st, all[i])
	}
}
