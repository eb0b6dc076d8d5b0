package degraded

import (
	"context"
	"net/url"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/internal/memstore"
)

// benchCommits is b.N claims with their strings as an edge makes them per
// request (a 16-byte tenant, a 36-byte GitHub delivery id, a 26-byte
// hook id), as BenchmarkDegradedMemory has them.
func benchCommits(n int) []driver.Claim {
	claims := make([]driver.Claim, n)
	for i := range claims {
		s := strconv.Itoa(i)
		claims[i] = driver.Claim{Tenant: "tenant-0000" + s[len(s)-1:] + "abcd", SourceID: "github",
			Key:    "72d3162e-cc78-11e3-81ab-" + strconv.FormatInt(int64(100000000000+i), 16),
			HookID: "01J9Z3K6Q8" + strconv.FormatInt(int64(1e15+i), 10)[:16],
			Node:   "edge-7", TTL: 72 * time.Hour}
	}
	return claims
}

// BenchmarkRecentCommits is what the index of recent commits costs a
// successful shared Commit (ns/op, allocs/op) and holds per commit
// (bytes/commit, the heap's growth over b.N commits after a GC, the
// claims' own strings dropped): "ring" is the index, "memstore" the
// alternative of committing each claim into a memory store.
func BenchmarkRecentCommits(b *testing.B) {
	b.Run("ring", func(b *testing.B) {
		r := newRecent(b.N, memstore.Monotonic)
		benchRecent(b, func(c []driver.Claim) { r.add(c, nil) })
		runtime.KeepAlive(r)
	})
	b.Run("memstore", func(b *testing.B) {
		conn, err := memstore.New(memstore.Monotonic).Open(driver.Config{
			URL: &url.URL{Scheme: "memory", Host: "bench"}, KeyPrefix: "b", Timeout: time.Second})
		if err != nil {
			b.Fatal(err)
		}
		benchRecent(b, func(c []driver.Claim) { _, _ = conn.Commit(context.Background(), c) })
		runtime.KeepAlive(conn)
	})
	b.Run("full", func(b *testing.B) { // the default size, full: each add forgets the oldest
		r := newRecent(100_000, memstore.Monotonic)
		r.add(benchCommits(100_000), nil)
		claims := benchCommits(b.N)
		for i := range claims {
			claims[i].Key += "-new"
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := range claims {
			r.add(claims[i:i+1], nil)
		}
	})
	b.Run("lookup", func(b *testing.B) {
		r := newRecent(b.N, memstore.Monotonic)
		claims := benchCommits(b.N)
		r.add(claims, nil)
		b.ReportAllocs()
		b.ResetTimer()
		for i := range claims {
			if _, _, ok := r.committer(&claims[i]); !ok {
				b.Fatal("not found")
			}
		}
	})
}

func benchRecent(b *testing.B, add func([]driver.Claim)) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	claims := benchCommits(b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range claims {
		add(claims[i : i+1])
	}
	b.StopTimer()
	claims = nil // only the index's references are left
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(b.N), "bytes/commit")
}

// TestCommitDigestInjective: the recent-commits index names a claim by
// its tenant, source and key, length-prefixed (CONTRACT §7): parts that
// concatenate to the same bytes are different claims, and a Hit of one
// is never answered as the other's Duplicate.
func TestCommitDigestInjective(t *testing.T) {
	for _, pair := range [][2][3]string{
		{{"ab", "c", "k"}, {"a", "bc", "k"}},
		{{"t", "s", "ab"}, {"t", "sa", "b"}},
		{{"t", "", "sk"}, {"t", "s", "k"}},
		{{"a:b", "c", "k"}, {"a", "b:c", "k"}},
	} {
		a := driver.Claim{Tenant: pair[0][0], SourceID: pair[0][1], Key: pair[0][2]}
		b := driver.Claim{Tenant: pair[1][0], SourceID: pair[1][1], Key: pair[1][2]}
		if commitDigest(&a) == commitDigest(&b) {
			t.Errorf("%q and %q share a digest", pair[0], pair[1])
		}
	}
	a := driver.Claim{Tenant: "t", SourceID: "s", Key: "k", HookID: "h1"}
	b := a
	b.HookID = "h2"
	if commitDigest(&a) != commitDigest(&b) {
		t.Error("the hook id is part of the digest: a retry by another hook would not be found")
	}
}
