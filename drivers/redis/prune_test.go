package redis

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/internal/scripts"
	"github.com/fleetstore/fleetstore/internal/testing/testserver"
)

// serverMicros is the server's clock (TIME), µs: what the scripts reckon
// expiries by.
func serverMicros(t *testing.T, admin goredis.UniversalClient) int64 {
	t.Helper()
	now, err := admin.Time(ctx(t)).Result()
	if err != nil {
		t.Fatal(err)
	}
	return now.UnixMicro()
}

// shardRecords counts the claim records of every shard of tenant that
// expired at or before nowMicros and those that did not (the state
// fields are not records), and the shards.
func shardRecords(t *testing.T, admin goredis.UniversalClient, prefix, tenant string, nowMicros int64) (expired, live, shards int) {
	t.Helper()
	keys, err := admin.Keys(ctx(t), scripts.TenantPattern(prefix, tenant)).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if !scripts.IsShardKey(k) {
			continue
		}
		shards++
		kv, err := admin.HGetAll(ctx(t), k).Result()
		if err != nil {
			t.Fatal(err)
		}
		for f, v := range kv {
			if len(f) != scripts.DigestSize {
				continue
			}
			_, _, us, ok := scripts.DecodeRecord(v)
			switch {
			case !ok:
				t.Fatalf("shard %q field %x: not a record: %q", k, f, v)
			case us <= nowMicros:
				expired++
			default:
				live++
			}
		}
	}
	return expired, live, shards
}

// TestShardPruneKeepsUp: under a stream of commits that expire, a shard
// drops its expired records about as fast as they expire (its prune is
// due once about an eighth of its records have expired, claim.lua), so
// that a tenant holds at most about 1.14 records per live one — never a
// shard filled to its cap with expired records, which is what waiting for
// the cap to prune would leave (60 live claims, 120 fields). The records
// counted as expired are those that were expired before the batch that
// was just committed began, so a slow machine only makes the bound easier.
func TestShardPruneKeepsUp(t *testing.T) {
	t.Parallel()
	srv := testserver.StartRedis(t)
	st, prefix := openStore(t, srv.URL())
	admin := adminClient(t, "", srv.Addr)
	tenant := "t-" + randHex(4)
	const ttl = 300 * time.Millisecond
	n, checks, worst := 0, 0, 0.0
	start := time.Now()
	// At least 8 TTLs and 12 checks: a loaded machine makes fewer rounds
	// in 8 TTLs, and goes on until it has checked enough.
	for time.Since(start) < 8*ttl || checks < 12 {
		before := serverMicros(t, admin)
		batch := make([]fleetstore.Claim, 5)
		for i := range batch {
			batch[i] = *claim(tenant, "github", fmt.Sprintf("evt-%06d", n), "hook-"+strconv.Itoa(n))
			batch[i].TTL = ttl
			n++
		}
		if err := st.Commit(ctx(t), batch...); err != nil {
			t.Fatal(err)
		}
		if time.Since(start) < 2*ttl {
			time.Sleep(ttl / 12)
			continue
		}
		expired, live, _ := shardRecords(t, admin, prefix, tenant, before)
		checks++
		if live > 0 {
			worst = max(worst, float64(expired)/float64(live))
		}
		if expired > live/4+3 {
			t.Errorf("after %d commits: %d expired records beside %d live ones, want at most %d", n, expired, live, live/4+3)
		}
		time.Sleep(ttl / 12)
	}
	t.Logf("%d commits, %d checks: at most %.2f expired records per live one", n, checks, worst)
}

// tenantState reads shard 0's state (s: "S", l in 1 byte, p in 4, e and
// x in 6 each): the level and the split pointer; ok false when it has
// none.
func tenantState(t *testing.T, admin goredis.UniversalClient, s0 string) (l, p int, ok bool) {
	t.Helper()
	v, err := admin.HGet(ctx(t), s0, "s").Result()
	if err == goredis.Nil {
		return 0, 0, false
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(v) != 18 || v[0] != 'S' {
		t.Fatalf("shard 0's state %x: want S and 17 bytes", v)
	}
	return int(v[1]), int(binary.BigEndian.Uint32([]byte(v[2:6]))), true
}

// shardOf is claim.lua's shard_index: the shard of the claim whose digest
// is d at level l and split pointer p.
func shardOf(d [scripts.DigestSize]byte, l, p int) int {
	h := uint64(binary.BigEndian.Uint32(d[:4]))
	i := int(h % (1 << l))
	if i < p {
		i = int(h % (1 << (l + 1)))
	}
	return i
}

// TestShardZeroOutlivesEveryRecord: shard 0 holds the tenant's level and
// split pointer, so it must live until the latest record of every shard:
// a claim committed for longer than all the others, in another shard (once
// a tenant has split, shard 0 holds its state alone),
// lengthens both its own shard and shard 0 (to its expiry, at most a
// second more: a shard's expiry is written at most once a second), and
// is still found once its own shard is the only other key.
func TestShardZeroOutlivesEveryRecord(t *testing.T) {
	t.Parallel()
	srv := testserver.StartRedis(t)
	st, prefix := openStore(t, srv.URL())
	admin := adminClient(t, "", srv.Addr)
	tenant := "t-" + randHex(4)
	var batch []fleetstore.Claim
	for i := range 300 {
		batch = append(batch, *claim(tenant, "github", fmt.Sprintf("evt-%06d", i), "hook-"+strconv.Itoa(i)))
	}
	if err := st.Commit(ctx(t), batch...); err != nil {
		t.Fatal(err)
	}
	s0 := scripts.ShardKey(prefix, tenant, 0)
	l, p, _ := tenantState(t, admin, s0)
	if l == 0 && p == 0 {
		t.Fatalf("300 claims and shard 0 says one shard")
	}
	// Once split, shard 0 holds the state alone: bucket b is shard b+1.
	if n, err := admin.HLen(ctx(t), s0).Result(); err != nil || n != 1 {
		t.Errorf("shard 0 of a split tenant holds %d fields, %v: want its state alone", n, err)
	}
	long := claim(tenant, "github", "long", "hook-long")
	shard := shardOf(scripts.ClaimDigest(long.SourceID, long.Key), l, p) + 1
	long.TTL = 5 * time.Hour
	if err := st.Commit(ctx(t), *long); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{s0, scripts.ShardKey(prefix, tenant, shard)} {
		ttl, err := admin.PTTL(ctx(t), k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if ttl < long.TTL-time.Minute || ttl > long.TTL+time.Second+2*time.Millisecond {
			t.Errorf("%q expires in %v, want the longest record's %v (at most a second more)", k, ttl, long.TTL)
		}
	}
	wantDuplicate(t, st, *long)
}

// TestMalformedShardState: a shard state field that is not the digits
// the scripts write (V4) is an error, never a decision.
func TestMalformedShardState(t *testing.T) {
	t.Parallel()
	srv := testserver.StartRedis(t)
	st, prefix := openStore(t, srv.URL())
	admin := adminClient(t, "", srv.Addr)
	ex := "\x00\x01\xa2\x34\x38\x01" + "\x00\x00\x00\x00\x00\x00"
	for i, fv := range [][]string{{"s", "x"}, {"s", ""}, {"s", "S" + ex}, {"s", "T\x00\x00\x00\x00\x00" + ex},
		{"s", "S\x00\x00\x00\x00\x00" + ex + "\x00"}, {"s", "S\x01\x00\x00\x00\x02" + ex},
		{"s", "S\x28\x00\x00\x00\x00" + ex}} {
		wantRefused(t, st, admin, prefix, "t-"+strconv.Itoa(i), fv[0], fv[1])
	}
}

// wantRefused writes value into field of tenant's shard 0 (field "" is
// the field of the claim on "k" of source "s") and wants a Hit and a
// Commit of that claim refused as the server's malformed reply (V4).
func wantRefused(t *testing.T, st *fleetstore.Store, admin goredis.UniversalClient, prefix, tenant, field, value string) {
	t.Helper()
	c := claim(tenant, "s", "k", "h")
	if field == "" {
		d := scripts.ClaimDigest(c.SourceID, c.Key)
		field = string(d[:])
	}
	if err := admin.HSet(ctx(t), scripts.ShardKey(prefix, tenant, 0), field, value).Err(); err != nil {
		t.Fatal(err)
	}
	_, err := st.Hit(ctx(t), nil, c)
	wantErrIs(t, fmt.Sprintf("hit on field %q = %q", field, value), err, fleetstore.ErrUnavailable)
	err = st.Commit(ctx(t), *c)
	wantErrIs(t, fmt.Sprintf("commit on field %q = %q", field, value), err, fleetstore.ErrUnavailable)
}

// TestMalformedBinaryRecord: a field that starts like a record (D or P)
// but whose expiry this code cannot have written — its first byte at
// 0x20 or above (past the year 2540), or further ahead than three claim
// TTLs of 366 days — or that has no hook_id is an error, never a decision
// (V4).
func TestMalformedBinaryRecord(t *testing.T) {
	t.Parallel()
	srv := testserver.StartRedis(t)
	st, prefix := openStore(t, srv.URL())
	admin := adminClient(t, "", srv.Addr)
	far := time.Now().Add(4 * 366 * 24 * time.Hour).UnixMicro()
	var farBytes [8]byte
	binary.BigEndian.PutUint64(farBytes[:], uint64(far))
	for i, v := range []string{"Dgarbage!", "Pgarbage!", "D\x1f\xff\xff\xff\xff\xff\xffh", "P" + string(farBytes[1:]) + "h",
		"D" + string(farBytes[1:])} {
		wantRefused(t, st, admin, prefix, "t-"+strconv.Itoa(i), "", v)
	}
}

// TestLongHookIDFound: a claim whose record is too long for a shard (a
// hook_id over 56 bytes) lives at its short key: a tenant with packed
// claims already that takes a long one answers Pending for it while it is
// pending and Duplicate naming it once committed.
func TestLongHookIDFound(t *testing.T) {
	t.Parallel()
	srv := testserver.StartRedis(t)
	st, _ := openStore(t, srv.URL())
	tenant := "t-" + randHex(4)
	for i := range 5 {
		if err := st.Commit(ctx(t), *claim(tenant, "github", "short-"+strconv.Itoa(i), "hook-"+strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	long := claim(tenant, "github", "long", "h"+strings.Repeat("x", 99))
	mustHit(t, st, nil, long, fleetstore.OK)
	other := *long
	other.HookID = "other"
	mustHit(t, st, nil, &other, fleetstore.Pending)
	if err := st.Commit(ctx(t), *long); err != nil {
		t.Fatal(err)
	}
	if res := mustHit(t, st, nil, &other, fleetstore.Duplicate); res.HookID != long.HookID {
		t.Errorf("Duplicate names %q, want the long hook_id", res.HookID)
	}
}
