package memcached

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore"
)

// parts are tenant, source or key values that stress the key encoding
// (V2, V3): separators, control bytes, the plain/hashed boundary, 1 KB.
func parts() []string {
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	return []string{
		"a", "b", "ab", "bc", "a:b", "b:c", "c", ":", "::", "a b", " ", "\n", "\r\n", "\x00", "a\x00b", "\x7f",
		"{tag}", "%3A", "rabc", "habc", "abc", "r", "h", "é", "日本",
		strings.Repeat("x", 40), strings.Repeat("x", 41), // the plain/hashed boundary
		strings.Repeat("é", 512),     // 1 KB of UTF-8
		strings.Repeat("\xff", 1024), // 1 KB of binary
		strings.Repeat("a:", 512),    // 1 KB of separators
		string(all), string(all[128:]), string(all[:32]),
		"fleetstore:b:rx", // looks like a key
	}
}

func legal(key string) bool {
	if len(key) > 250 {
		return false
	}
	for i := 0; i < len(key); i++ {
		if key[i] <= ' ' || key[i] == 0x7f {
			return false
		}
	}
	return true
}

// TestKeysLegalAndInjective checks every bucket and claim key built from
// parts: legal for memcached (V3), and distinct inputs give distinct keys
// (V2: bucket keys always, claim keys but for a 128-bit digest collision;
// "ab"+"c" and "a"+"bc" are distinct parts), with the longest key_prefix,
// and one ending like a claim key's tag.
func TestKeysLegalAndInjective(t *testing.T) {
	t.Parallel()
	for _, prefix := range []string{strings.Repeat("p", 60) + ":/.-", "x:c"} {
		keysInjective(t, keys{prefix: prefix})
	}
}

func keysInjective(t *testing.T, k keys) {
	ps := parts()
	seen := make(map[string]string)
	add := func(key, what string) {
		t.Helper()
		if !legal(key) {
			t.Fatalf("%s: illegal memcached key %q (%d bytes)", what, key, len(key))
		}
		if prev, dup := seen[key]; dup {
			t.Fatalf("%s and %s share key %q", prev, what, key)
		}
		seen[key] = what
	}
	for _, tenant := range ps {
		add(k.bucket(tenant), "bucket "+strconvQ(tenant))
		for _, source := range ps {
			for _, key := range ps {
				add(k.claim(tenant, source, key), "claim "+strconvQ(tenant)+"/"+strconvQ(source)+"/"+strconvQ(key))
			}
		}
	}
	// Every key of a tenant lands on one server: a claim key carries the
	// tenant's server hash, a bucket key is never read as a claim key.
	for _, tenant := range ps {
		if h, ok := claimHash(k.bucket(tenant)); ok {
			t.Fatalf("bucket key %q read as a claim key of hash %x", k.bucket(tenant), h)
		}
		if h, ok := claimHash(k.claim(tenant, "s", "k")); !ok || h != tenantHash(tenant) {
			t.Fatalf("tenant %q: claim key carries hash %x, %v, want %x", tenant, h, ok, tenantHash(tenant))
		}
		b := shard(k.bucket(tenant), 7)
		for _, source := range ps[:5] {
			if s := shard(k.claim(tenant, source, "evt"), 7); s != b {
				t.Fatalf("tenant %q: claim on server %d, bucket on %d", tenant, s, b)
			}
		}
	}
}

func strconvQ(s string) string {
	if len(s) > 12 {
		return strings.ToValidUTF8(s[:12], "?") + "…"
	}
	return "\"" + s + "\""
}

// TestKeysLive uses awkward parts against real servers: memcached accepts
// every key, and tenant "a:b" + source "c" never meets tenant "a" +
// source "b:c".
func TestKeysLive(t *testing.T) {
	t.Parallel()
	srv := startServers(t, 2)
	st := openStore(t, srv, 5*time.Second)
	ctx := context.Background()
	ps := parts()
	for i, tenant := range ps {
		c := fleetstore.Charge{Kind: fleetstore.Hooks, Tenant: tenant, Increment: time.Hour, Capacity: time.Hour}
		cl := fleetstore.Claim{Tenant: tenant, SourceID: ps[(i+1)%len(ps)], Key: ps[(i+2)%len(ps)], HookID: ps[(i+3)%len(ps)], Node: ps[(i+4)%len(ps)], TTL: time.Hour, PendingTTL: time.Hour}
		if len(cl.HookID) > 256 {
			cl.HookID = cl.HookID[:256]
		}
		if len(cl.Node) > 256 {
			cl.Node = cl.Node[:256]
		}
		if res, err := st.Hit(ctx, []fleetstore.Charge{c}, &cl); err != nil || res.Outcome != fleetstore.OK {
			t.Fatalf("tenant %s: hit = %v, %v", strconvQ(tenant), res, err)
		}
		if err := st.Commit(ctx, cl); err != nil {
			t.Fatalf("tenant %s: commit: %v", strconvQ(tenant), err)
		}
		other := cl
		other.HookID = "other"
		if res, err := st.Hit(ctx, nil, &other); err != nil || res.Outcome != fleetstore.Duplicate || res.HookID != cl.HookID {
			t.Fatalf("tenant %s: hit after commit = %+v, %v, want duplicate by the committer", strconvQ(tenant), res, err)
		}
		if res, err := st.Hit(ctx, []fleetstore.Charge{c}, nil); err != nil || res.Outcome != fleetstore.RateLimited {
			t.Fatalf("tenant %s: second charge = %v, %v, want rate_limited", strconvQ(tenant), res, err)
		}
	}
	a := fleetstore.Claim{Tenant: "a:b", SourceID: "c", Key: "k", HookID: "h1", TTL: time.Hour, PendingTTL: time.Hour}
	b := fleetstore.Claim{Tenant: "a", SourceID: "b:c", Key: "k", HookID: "h2", TTL: time.Hour, PendingTTL: time.Hour}
	for _, cl := range []fleetstore.Claim{a, b} {
		if res, err := st.Hit(ctx, nil, &cl); err != nil || res.Outcome != fleetstore.OK {
			t.Fatalf("claim %q/%q: %v, %v: the two scopes met", cl.Tenant, cl.SourceID, res, err)
		}
	}
	if err := st.Reset(ctx, "a:b"); err != nil {
		t.Fatal(err)
	}
}
