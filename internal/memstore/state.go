package memstore

import (
	"hash/maphash"
	"sync"

	"github.com/fleetstore/fleetstore/claim"
)

const shardCount = 64

// state is one store's data: buckets and claims, sharded by tenant so that a
// Hit (one tenant) takes one shard lock.
type state struct {
	now    Clock
	seed   maphash.Seed
	shards [shardCount]shard
}

type shard struct {
	mu      sync.Mutex
	buckets map[string]*tenantBuckets
	windows map[string]*tenantWindows // by tenant
	claims  map[claimID]claim.State
	writes  int // since the last sweep
	kept    int // records left by the last sweep
	_       [32]byte
}

// tenantBuckets holds every kind's TAT of one tenant: one record per tenant,
// so Reset is one delete.
type tenantBuckets struct {
	tats    []kindTAT
	expires int64 // µs: the largest TAT; the record is dead after it
}

type kindTAT struct {
	kind string
	tat  int64 // µs
}

type claimID struct{ tenant, source, key string }

func newState(now Clock) *state {
	st := &state{now: now, seed: maphash.MakeSeed()}
	for i := range st.shards {
		st.shards[i].buckets = make(map[string]*tenantBuckets)
		st.shards[i].windows = make(map[string]*tenantWindows)
		st.shards[i].claims = make(map[claimID]claim.State)
	}
	return st
}

func (st *state) shard(tenant string) *shard {
	return &st.shards[maphash.String(st.seed, tenant)%shardCount]
}

// tat returns the live TAT of kind (0 when absent or passed: a full bucket).
func (b *tenantBuckets) tat(kind string, now int64) int64 {
	if b == nil || b.expires <= now {
		return 0
	}
	for _, kt := range b.tats {
		if kt.kind == kind {
			return kt.tat
		}
	}
	return 0
}

func (b *tenantBuckets) set(kind string, tat int64) {
	if tat > b.expires {
		b.expires = tat
	}
	for i := range b.tats {
		if b.tats[i].kind == kind {
			b.tats[i].tat = tat
			return
		}
	}
	b.tats = append(b.tats, kindTAT{kind: kind, tat: tat})
}

// wrote counts a write and, once the shard has seen as many writes as the
// last sweep left records (plus a floor), drops every expired record: a
// sweep costs O(records) ≤ O(2·kept + 64), so O(1) per write amortised, and
// the shard never holds more than its live records plus kept + 64.
func (sh *shard) wrote(now int64) {
	sh.writes++
	if sh.writes < sh.kept+64 {
		return
	}
	sh.writes = 0
	defer func() { sh.kept = len(sh.buckets) + len(sh.windows) + len(sh.claims) }()
	for t, b := range sh.buckets {
		if b.expires <= now {
			delete(sh.buckets, t)
		}
	}
	for t, w := range sh.windows {
		if w.expires <= now {
			delete(sh.windows, t)
		}
	}
	for id, c := range sh.claims {
		if !c.Live(now) {
			delete(sh.claims, id)
		}
	}
}
