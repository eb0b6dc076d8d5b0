package redis

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/internal/scripts"
	"github.com/fleetstore/fleetstore/internal/testing/testserver"
)

// TestBucketExpiryFollowsLatestTAT: the TATs are fields of the tenant's
// shard 0, which expires at its latest TAT of every kind, charged or not,
// and at most SLACK (1s) later (G7): a charge of a kind with an earlier
// TAT never shortens it, a later TAT lengthens it. The script knows the
// key's expiry from shard 0's state (no PTTL), so a broken reckoning shows
// here. Reset deletes the TATs alone: the next charge finds a full bucket,
// and the expiry is not shortened.
func TestBucketExpiryFollowsLatestTAT(t *testing.T) {
	t.Parallel()
	srv := testserver.StartRedis(t)
	st, prefix := openStore(t, srv.URL())
	tenant := "t-" + randHex(4)
	s0 := scripts.ShardKey(prefix, tenant, 0)
	long := fleetstore.Charge{Kind: "long", Tenant: tenant, Increment: 10 * time.Minute, Capacity: time.Hour}
	// The short TAT is 30s ahead: a loaded machine's delay before PTTL
	// (seconds at worst) does not reach its lower bound.
	short := fleetstore.Charge{Kind: "short", Tenant: tenant, Increment: 30 * time.Second,
		Capacity: 10 * time.Minute}
	const slack = time.Second + 2*time.Millisecond
	pttl := func(what string, lo, hi time.Duration) {
		t.Helper()
		v, err := srv.Do("PTTL", s0)
		if err != nil {
			t.Fatal(err)
		}
		ms, _ := v.(int64)
		if got := time.Duration(ms) * time.Millisecond; got < lo || got > hi {
			t.Errorf("%s: shard 0 expires in %v, want %v to %v", what, got, lo, hi)
		}
	}
	mustHit(t, st, []fleetstore.Charge{short}, nil, fleetstore.OK)
	pttl("a new shard 0", 20*time.Second, 30*time.Second+slack)
	mustHit(t, st, []fleetstore.Charge{long}, nil, fleetstore.OK)
	pttl("a later TAT of another kind", 10*time.Minute-time.Minute, 10*time.Minute+slack)
	mustHit(t, st, []fleetstore.Charge{short}, nil, fleetstore.OK)
	pttl("an earlier TAT charged after it", 10*time.Minute-time.Minute, 10*time.Minute+slack)
	mustHit(t, st, []fleetstore.Charge{short, long}, nil, fleetstore.OK)
	pttl("both, the later one lengthened", 20*time.Minute-time.Minute, 20*time.Minute+slack)
	// A claim beside the TATs (its record lengthens shard 0's expiry to
	// its TTL): Reset keeps it, and the state.
	c := claim(tenant, "github", "k-"+randHex(4), "h1")
	c.TTL = 30 * time.Minute
	if err := st.Commit(ctx(t), *c); err != nil {
		t.Fatal(err)
	}
	if err := st.Reset(ctx(t), tenant); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{scripts.TATField("short"), scripts.TATField("long")} {
		if v, err := srv.Do("HEXISTS", s0, f); err != nil || v != int64(0) {
			t.Errorf("after Reset, field %q: %v, %v; want none", f, v, err)
		}
	}
	if v, err := srv.Do("HEXISTS", s0, "s"); err != nil || v != int64(1) {
		t.Errorf("after Reset, the state: %v, %v; want kept", v, err)
	}
	pttl("after Reset", 30*time.Minute-time.Minute, 30*time.Minute+slack)
	res := mustHit(t, st, []fleetstore.Charge{long}, nil, fleetstore.OK)
	if got := res.Buckets[0].ResetAfter; got != 10*time.Minute {
		t.Errorf("after Reset, a charge of 10min resets after %v: want a full bucket's 10min", got)
	}
	o := *c
	o.HookID = "h2"
	if res := mustHit(t, st, nil, &o, fleetstore.Duplicate); res.HookID != c.HookID {
		t.Errorf("after Reset, the committed claim answers %q, want %q", res.HookID, c.HookID)
	}
}

// TestClaimRecordLayout: a claim is field D of its tenant's shard, D its
// 16-byte digest whatever the length of its source and key, holding the
// state, the expiry and the hook_id alone (CONTRACT §7): "P", the pending
// expiry (µs, 7 bytes) and the hook_id, then "D", the committed expiry
// and the hook_id. Its bytes do not grow with the event key or the node. A
// hook_id too long for a listpack value goes to the claim's own short key,
// with the same record.
func TestClaimRecordLayout(t *testing.T) {
	t.Parallel()
	srv := testserver.StartRedis(t)
	st, prefix := openStore(t, srv.URL())
	tenant := "t-" + randHex(4)
	shard := scripts.ShardKey(prefix, tenant, 0) // one shard: few claims
	check := func(what string, v any, state byte, ttl time.Duration, hook string) {
		t.Helper()
		s, _ := v.(string)
		st, h, us, ok := scripts.DecodeRecord(s)
		if !ok || st != state || h != hook || len(s) != 8+len(hook) {
			t.Errorf("%s record %q, want %c, 7 bytes of expiry, the hook_id", what, s, state)
			return
		}
		if left := time.Until(time.UnixMicro(us)); left > ttl || left < ttl-time.Minute {
			t.Errorf("%s record's expiry %q: %v from now, want %v", what, s[1:8], left, ttl)
		}
	}
	for _, key := range []string{"k", strings.Repeat("e", 1024)} {
		for _, hook := range []string{"hook-" + randHex(4), "h" + strings.Repeat("x", 56)} {
			ck := hook + key
			cl := claim(tenant, "github", ck[:min(len(ck), 1024)], hook)
			cl.Node = strings.Repeat("n", 256)
			short := scripts.ClaimKey(prefix, tenant, cl.SourceID, cl.Key)
			if want := len(scripts.TenantTag(prefix, tenant)) + scripts.DigestSize; len(short) != want {
				t.Fatalf("claim key of %d bytes, want %d", len(short), want)
			}
			d := short[len(short)-scripts.DigestSize:]
			get := func() (any, error) {
				if len(hook) > 56 {
					return srv.Do("GET", short)
				}
				return srv.Do("HGET", shard, d)
			}
			mustHit(t, st, nil, cl, fleetstore.OK)
			v, err := get()
			if err != nil {
				t.Fatal(err)
			}
			check("pending", v, 'P', cl.PendingTTL, hook)
			if err := st.Commit(ctx(t), *cl); err != nil {
				t.Fatal(err)
			}
			if v, err = get(); err != nil {
				t.Fatal(err)
			}
			check("committed", v, 'D', cl.TTL, hook)
			// The other place holds nothing.
			if len(hook) > 56 {
				v, err = srv.Do("HGET", shard, d)
			} else {
				v, err = srv.Do("GET", short)
			}
			if err != nil || v != nil {
				t.Errorf("hook_id of %d bytes: the other place holds %v, %v", len(hook), v, err)
			}
		}
	}
	if v, err := srv.Do("OBJECT", "ENCODING", shard); err != nil || v != "listpack" {
		t.Errorf("shard encoding %v, %v: want listpack", v, err)
	}
}

// TestClaimBytesAcrossSplits: one tenant's committed claims stay under
// 75 bytes each (MEMORY USAGE of every key of the tenant, over its
// claims; bench/README.md gives about 60) as its shards split, every shard
// stays a listpack well below the server's 512 fields, and every claim is
// still found after the splits that moved it.
func TestClaimBytesAcrossSplits(t *testing.T) {
	t.Parallel()
	srv := testserver.StartRedis(t)
	st, prefix := openStore(t, srv.URL())
	admin := adminClient(t, "", srv.Addr)
	tenant := "tenant-000123"
	var all []fleetstore.Claim
	for round := 1; round <= 8; round++ {
		for range 500 / 100 {
			batch := make([]fleetstore.Claim, 100)
			for i := range batch {
				n := len(all) + i
				batch[i] = fleetstore.Claim{Tenant: tenant, SourceID: "github",
					Key:    fmt.Sprintf("%08x-0f1e-11ef-8a2b-%012x", n, n*7919),
					HookID: fmt.Sprintf("01J%023d", n), TTL: time.Hour, PendingTTL: time.Minute}
			}
			if err := st.Commit(ctx(t), batch...); err != nil {
				t.Fatal(err)
			}
			all = append(all, batch...)
		}
		keys, err := admin.Keys(ctx(t), scripts.TenantPattern(prefix, tenant)).Result()
		if err != nil {
			t.Fatal(err)
		}
		var bytes int64
		shards := 0
		for _, k := range keys {
			n, err := admin.MemoryUsage(ctx(t), k, 0).Result()
			if err != nil {
				t.Fatal(err)
			}
			bytes += n
			if !scripts.IsShardKey(k) {
				continue
			}
			shards++
			if enc, err := admin.ObjectEncoding(ctx(t), k).Result(); err != nil || enc != "listpack" {
				t.Errorf("shard %q: encoding %q, %v; want listpack", k, enc, err)
			}
			if n, err := admin.HLen(ctx(t), k).Result(); err != nil || n > 256 {
				t.Errorf("shard %q holds %d fields, %v", k, n, err)
			}
		}
		per := float64(bytes) / float64(len(all))
		t.Logf("%d claims: %d shards, %.1f bytes per claim", len(all), shards, per)
		if per > 75 {
			t.Errorf("%d claims in %d shards: %.1f bytes per claim, want ≤ 75 (CONTRACT §7: about 60)", len(all), shards, per)
		}
		if round == 8 && shards < 16 {
			t.Errorf("%d claims in %d shards: want splits", len(all), shards)
		}
	}
	// Every claim is still there, and answers Duplicate naming its committer.
	for chunk := range slices.Chunk(all, 500) {
		v, err := admin.Eval(ctx(t), scripts.Present.Source, scripts.PresentCall(prefix, chunk)).Result()
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := v.([]any); len(got) != len(chunk) {
			t.Fatalf("%d of %d committed claims present after the splits", len(got), len(chunk))
		}
	}
	for _, i := range []int{0, 1, len(all) / 2, len(all) - 1} {
		wantDuplicate(t, st, all[i])
	}
}
