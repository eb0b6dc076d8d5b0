package degraded

import (
	"crypto/sha256"
	"encoding/binary"
	"strings"
	"sync"

	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/internal/memstore"
)

// recent is the index of this node's recent commits (CONTRACT §8): every
// claim the shared store committed for this node (a Commit or a replay),
// and every one it answered this node a Duplicate of, by digest, with its
// committer and expiry, the newest size of them. While degraded, a Hit on
// a claim it holds is decided by the local store as if the commit were
// there: a provider's retry reaching a node that stored the hook, or was
// told of it, is a Duplicate through an outage, not a second admission.
//
// A fixed ring of entries and a map from digest to slot: adding one is a
// SHA-256 of the claim's identity, one map write and one copy of the
// hook_id (its only allocation), under one lock; the oldest entry is
// overwritten once the ring is full. BenchmarkRecentCommits measures it.
type recent struct {
	mu    sync.Mutex
	size  int
	ring  []recentEntry      // grows to size, then wraps
	next  int                // the slot the next entry takes once the ring is full
	slot  map[[16]byte]int32 // digest → its slot in ring
	clock memstore.Clock
}

type recentEntry struct {
	digest  [16]byte
	expires int64  // µs of the local clock; 0: the slot is free
	hookID  string // the committer
}

func newRecent(size int, clock memstore.Clock) *recent {
	return &recent{size: size, slot: make(map[[16]byte]int32), clock: clock}
}

// commitDigest is the first 16 bytes of SHA-256 over the claim's tenant,
// source and key, each but the last after its length (uvarint): an
// injective encoding, so two claims share a digest only when SHA-256
// collides on 128 bits (the claim keys' odds, CONTRACT §7).
func commitDigest(c *driver.Claim) [16]byte {
	var buf [192]byte
	b := binary.AppendUvarint(buf[:0], uint64(len(c.Tenant)))
	b = append(b, c.Tenant...)
	b = binary.AppendUvarint(b, uint64(len(c.SourceID)))
	b = append(b, c.SourceID...)
	b = append(b, c.Key...)
	sum := sha256.Sum256(b)
	return [16]byte(sum[:16])
}

// add records claims[i], committed by the shared store now with its TTL,
// for every i whose errs[i] is nil (errs nil: every claim).
func (r *recent) add(claims []driver.Claim, errs []error) {
	if r.size <= 0 {
		return
	}
	now := r.clock()
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range claims {
		if errs == nil || errs[i] == nil {
			r.record(&claims[i], claims[i].HookID, now)
		}
	}
}

// told records c's key as committed by committer: the shared store
// answered a Hit of c Duplicate naming it. The answer does not say how
// long the commit lasts: it is kept for c's TTL at most, the window the
// Hit's own commit would have had.
func (r *recent) told(c *driver.Claim, committer string) {
	if r.size <= 0 {
		return
	}
	now := r.clock()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.record(c, committer, now)
}

// record puts c's key, committed by hookID, expiring c's TTL after now.
// A copy of hookID: the entry must not keep alive the buffer the caller
// cut it from.
func (r *recent) record(c *driver.Claim, hookID string, now int64) {
	r.put(recentEntry{digest: commitDigest(c), expires: now + c.TTL.Microseconds(),
		hookID: strings.Clone(hookID)})
}

func (r *recent) put(e recentEntry) {
	if old, ok := r.slot[e.digest]; ok { // committed again: the newer entry answers
		r.ring[old] = recentEntry{}
	}
	var at int
	if len(r.ring) < r.size {
		at = len(r.ring)
		r.ring = append(r.ring, e)
	} else {
		at = r.next
		r.next = (r.next + 1) % r.size
		if old := &r.ring[at]; old.expires != 0 && r.slot[old.digest] == int32(at) {
			delete(r.slot, old.digest) // the oldest is forgotten
		}
		r.ring[at] = e
	}
	r.slot[e.digest] = int32(at)
}

// committer returns the hook that committed c, and how long its commit
// lasts (µs), while it does.
func (r *recent) committer(c *driver.Claim) (hookID string, left int64, ok bool) {
	d := commitDigest(c)
	now := r.clock()
	r.mu.Lock()
	defer r.mu.Unlock()
	at, ok := r.slot[d]
	if !ok {
		return "", 0, false
	}
	e := r.ring[at]
	if e.expires <= now {
		return "", 0, false
	}
	return e.hookID, e.expires - now, true
}
