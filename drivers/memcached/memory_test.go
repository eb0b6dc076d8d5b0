package memcached

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/claim"
	"github.com/fleetstore/fleetstore/internal/testing/testserver"
)

// The claim the memory figures store, the shape of bench/cmd/compare's
// memory rows: a GitHub delivery (a 36-byte UUID) of one of 1000 tenants
// (24-byte ids), held by a 26-byte hook id (a ULID's length) on node
// "edge-01", committed for 72 hours, under the default key_prefix.
func memClaim(i int) fleetstore.Claim {
	return fleetstore.Claim{
		Tenant: fmt.Sprintf("tenant-%s-%06d", "k3v9q2x7lm", i%1000), SourceID: "github",
		Key:    fmt.Sprintf("%08x-0f1e-11ef-8a2b-%012x", i, i*7919),
		HookID: fmt.Sprintf("01J%023d", i),
		Node:   "edge-01", TTL: 72 * time.Hour, PendingTTL: time.Minute,
	}
}

// claimState is cl committed now, as the driver stores it.
func claimState(cl fleetstore.Claim) claim.State {
	return claim.State{Phase: claim.Committed, HookID: cl.HookID, Node: cl.Node, Expires: wallMicros() + cl.TTL.Microseconds()}
}

// mcStats is what memory is measured by: `stats` and `stats slabs`.
type mcStats struct {
	items, bytes, hashBytes, malloced int64
	chunks                            map[int64]int64 // chunk_size → used_chunks
}

// chunkBytes is the bytes of every chunk in use.
func (s mcStats) chunkBytes() (n int64) {
	for size, used := range s.chunks {
		n += size * used
	}
	return n
}

// readStats reads the server's `stats` and `stats slabs`.
func readStats(t testing.TB, addr string) mcStats {
	t.Helper()
	st, sl := testserver.MemcachedStats(t, addr, ""), testserver.MemcachedStats(t, addr, "slabs")
	s := mcStats{items: st["curr_items"], bytes: st["bytes"], hashBytes: st["hash_bytes"], malloced: sl["total_malloced"], chunks: map[int64]int64{}}
	for k, size := range sl {
		if cls, ok := strings.CutSuffix(k, ":chunk_size"); ok {
			s.chunks[size] += sl[cls+":used_chunks"]
		}
	}
	return s
}

// claimMemory is what n committed claims (memClaim) cost on a fresh
// memcached started with args: per claim, the items' own bytes (`stats`
// bytes: header, key, value), the slab chunks they occupy and the slab
// pages malloced; the hash table per item; and the chunk sizes that grew.
type claimMemory struct {
	item, chunk, malloced, hash float64
	grew                        []int64
}

func measureClaims(t testing.TB, n int, args ...string) claimMemory {
	t.Helper()
	srv := testserver.StartMemcached(t, args...)
	st, err := fleetstore.Open("memcached://"+srv.Addr+"?max_conns=8", fleetstore.WithTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	if err := st.Commit(ctx, memClaim(-1)); err != nil { // opens a connection
		t.Fatal(err)
	}
	before := readStats(t, srv.Addr)
	const batch, workers = 100, 8
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for b := w * batch; b < n && errs[w] == nil; b += workers * batch {
				cls := make([]fleetstore.Claim, 0, batch)
				for i := b; i < min(n, b+batch); i++ {
					cls = append(cls, memClaim(i))
				}
				errs[w] = st.Commit(ctx, cls...)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // a hash table expansion runs in the background
	after := readStats(t, srv.Addr)
	if got := after.items - before.items; got != int64(n) {
		t.Fatalf("%d claims committed, %d new items", n, got)
	}
	m := claimMemory{
		item:     float64(after.bytes-before.bytes) / float64(n),
		chunk:    float64(after.chunkBytes()-before.chunkBytes()) / float64(n),
		malloced: float64(after.malloced-before.malloced) / float64(n),
		hash:     float64(after.hashBytes) / float64(after.items),
	}
	for size, used := range after.chunks {
		if used > before.chunks[size] {
			m.grew = append(m.grew, size)
		}
	}
	return m
}

// itemHeader is memcached 1.6's item header with CAS (the driver needs
// CAS): sizeof(item) 48 bytes on 64-bit, plus the 8-byte CAS. An item is
// the header, the key and a NUL, and the value and "\r\n" (flags 0 take
// no room).
const itemHeader = 48 + 8

// itemSize is the `stats` bytes of one item: what the slab chunk must hold.
func itemSize(key string, value []byte) int { return itemHeader + len(key) + 1 + len(value) + 2 }

// TestClaimItemBytes commits claims of the documented shape on a real
// memcached and checks that each costs what the package doc says: the
// item's bytes are the header, key and value of the driver's own encoding
// and the doc's formula, and the items fill chunks of one size that holds
// them.
func TestClaimItemBytes(t *testing.T) {
	t.Parallel()
	m := measureClaims(t, 1000)
	cl := memClaim(0)
	key := keys{prefix: fleetstore.DefaultKeyPrefix}.claim(cl.Tenant, cl.SourceID, cl.Key)
	val := encodeClaim(claimState(cl))
	want := itemSize(key, val)
	if m.item != float64(want) {
		t.Errorf("a committed claim is %.1f bytes of items, want %d (key %d + value %d + header and terminators %d)", m.item, want, len(key), len(val), want-len(key)-len(val))
	}
	// The package doc's Memory section: 56 + 3 + (len(key_prefix) + 30) +
	// (10 + len(hook_id) + len(node)).
	if doc := 56 + 3 + len(fleetstore.DefaultKeyPrefix) + 30 + 10 + len(cl.HookID) + len(cl.Node); m.item != float64(doc) {
		t.Errorf("a committed claim is %.1f bytes of items, the package doc says %d", m.item, doc)
	}
	if len(m.grew) != 1 || m.chunk != float64(m.grew[0]) || m.grew[0] < int64(want) {
		t.Fatalf("claims of %d bytes grew chunks %v, %.1f bytes each", want, m.grew, m.chunk)
	}
	t.Logf("committed claim: %d-byte key, %d-byte value, %d-byte item in a %d-byte chunk", len(key), len(val), want, m.grew[0])
}

// BenchmarkClaimMemory commits 100 000 claims (memClaim: the shape of
// make compare's memory rows) on a fresh memcached and reports their
// memory per claim: item-B (`stats` bytes: header, key, value), chunk-B
// (the slab chunks they occupy, `stats slabs`), malloc-B (slab pages
// malloced, 1 MB each) and hash-B/item (the hash table over every item:
// 8 bytes a bucket, doubled when items exceed 1.5 a bucket), at the server's
// default settings (-n 48 -f 1.25) and with a finer slab growth factor.
//
//	go test -run '^$' -bench ClaimMemory -benchtime 1x ./drivers/memcached
func BenchmarkClaimMemory(b *testing.B) {
	for _, c := range []struct {
		name string
		args []string
	}{{"default", nil}, {"f=1.05", []string{"-f", "1.05"}}} {
		b.Run(c.name, func(b *testing.B) {
			var m claimMemory
			for range b.N {
				m = measureClaims(b, 100_000, c.args...)
			}
			b.ReportMetric(m.item, "item-B/claim")
			b.ReportMetric(m.chunk, "chunk-B/claim")
			b.ReportMetric(m.malloced, "malloc-B/claim")
			b.ReportMetric(m.hash, "hash-B/item")
		})
	}
}
