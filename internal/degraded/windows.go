package degraded

import (
	"context"
	"hash/maphash"
	"math/bits"
	"strings"
	"sync"

	"github.com/fleetstore/fleetstore/calendar"
	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/internal/memstore"
)

// maxWindows is how many quota windows the degraded mode remembers, each
// a tenant, kind and window with the count the shared store last
// reported of it (CONTRACT §8.2, §8.8). About 160 bytes each with a
// 16-byte tenant: some 11 MB full (BenchmarkQuotaWindows).
const maxWindows = 1 << 16

const windowShards = 16

// windowKey names a quota window: its tenant, kind and end (µs).
type windowKey struct {
	tenant string
	kind   driver.Kind
	end    int64
}

// clone is k holding its own strings, not a caller's (which may be part
// of a larger one).
func (k windowKey) clone() windowKey {
	k.tenant, k.kind = strings.Clone(k.tenant), driver.Kind(strings.Clone(string(k.kind)))
	return k
}

// windowSeen is what this node knows of one quota window.
type windowSeen struct {
	// used is the largest count of the window a shared Hit or Peek
	// reported, U: the fleet had taken at least that much.
	used int64
	// seeded is how many units the local store's count of the window
	// holds that are not this node's: n less its allowance, put there
	// before its first local decision and raised as used grows.
	seeded int64
}

type windowShard struct {
	mu sync.Mutex
	m  map[windowKey]windowSeen
}

// windows is a calendar quota's rule while degraded (CONTRACT §8.2):
// this node remembers the count each shared Hit or Peek reported of a
// quota's window, U, and admits locally at most its share of what was
// left, floor(s × (n − U)), in that window, all its outages together. It
// does so by seeding the local store's count of the window with the rest,
// n − floor(s × (n − U)), before a local decision: the local store then
// decides the window charge with its buckets, all or nothing (G3), and
// reports Used as the fleet's count as this node reckons it, so that n −
// Used is what it may still admit. A window it knows no count of has U =
// 0: the static share of n.
type windows struct {
	share  Share
	clock  memstore.Clock
	cap    int // windows per shard
	seed   maphash.Seed
	shards [windowShards]windowShard
}

func newWindows(share Share, clock memstore.Clock, size int) *windows {
	w := &windows{share: share, clock: clock, cap: max(size/windowShards, 1),
		seed: maphash.MakeSeed()}
	for i := range w.shards {
		w.shards[i].m = make(map[windowKey]windowSeen)
	}
	return w
}

func (w *windows) shard(tenant string) *windowShard {
	return &w.shards[maphash.String(w.seed, tenant)%windowShards]
}

// saw remembers the counts a shared Hit or Peek of charges reported in
// r, a checked Result: the window of each is the one whose end is
// nearest this node's clock plus its reset-after, as the store counts in
// the window holding its own clock.
func (w *windows) saw(charges []driver.Charge, r *driver.Result) {
	now, read := int64(0), false
	for i := range charges {
		c := &charges[i]
		if !c.IsWindow() || i >= r.NBuckets {
			continue
		}
		if !read {
			now, read = w.clock(), true
		}
		b := &r.Buckets[i]
		end := nearestEnd(&c.Window.Edges, now+b.ResetAfter.Microseconds())
		sh := w.shard(c.Tenant)
		k := windowKey{tenant: c.Tenant, kind: c.Kind, end: end}
		sh.mu.Lock()
		e, ok := sh.m[k]
		if !ok {
			k = k.clone()
			w.makeRoom(sh, now)
		}
		if b.Used > e.used || !ok {
			e.used = max(e.used, b.Used)
			sh.m[k] = e
		}
		sh.mu.Unlock()
	}
}

// nearestEnd returns the end of the window of edges nearest at (µs).
func nearestEnd(e *[4]int64, at int64) int64 {
	k := 1
	for j := 2; j < len(e); j++ {
		if dist(e[j], at) < dist(e[k], at) {
			k = j
		}
	}
	return e[k]
}

func dist(a, b int64) uint64 {
	if a > b {
		return uint64(a) - uint64(b)
	}
	return uint64(b) - uint64(a)
}

// prepare seeds conn's counts of the windows that charges, a local
// decision's, count in (the ones holding the clock): each holds n −
// floor(s × (n − U)) units that are not this node's before the decision.
// A seed is written once a window and raised as U grows; the local store's
// count then never lets this node's own units pass its allowance.
func (w *windows) prepare(conn driver.Conn, charges []driver.Charge) {
	now, read := int64(0), false
	for i := range charges {
		c := &charges[i]
		if !c.IsWindow() {
			continue
		}
		if !read {
			now, read = w.clock(), true
		}
		k := calendar.Holding(c.Window.Edges, now)
		if k < 0 {
			continue // the local store refuses it (the clock is off by a window)
		}
		start, end := c.Window.Edges[k], c.Window.Edges[k+1]
		sh := w.shard(c.Tenant)
		key := windowKey{tenant: c.Tenant, kind: c.Kind, end: end}
		sh.mu.Lock()
		e, ok := sh.m[key]
		if !ok {
			key = key.clone()
			w.makeRoom(sh, now)
		}
		n := c.Window.Max // the quota's own, a shadow one's too
		if want := n - w.allowance(n, e.used); want > e.seeded {
			if seedWindow(conn, c, start, end, want-e.seeded) {
				e.seeded = want
			}
		}
		sh.m[key] = e
		sh.mu.Unlock()
	}
}

// holdAll reports whether this node's clock falls in one of the windows
// of every window charge of charges. A charge built more than a window
// away from it (a stale time, or a clock off by a window) cannot be
// decided locally either: the local store refuses it as the shared one
// did, and its failure is the charge's, no outage.
func (w *windows) holdAll(charges []driver.Charge) bool {
	now, read := int64(0), false
	for i := range charges {
		c := &charges[i]
		if !c.IsWindow() {
			continue
		}
		if !read {
			now, read = w.clock(), true
		}
		if calendar.Holding(c.Window.Edges, now) < 0 {
			return false
		}
	}
	return true
}

// allowance is floor(s × (n − U)): what this node may admit of a window
// of n units whose count was U.
func (w *windows) allowance(n, used int64) int64 {
	left := uint64(n - min(used, n))
	hi, lo := bits.Mul64(left, w.share.num)
	q, _ := bits.Div64(hi, lo, w.share.den) // ≤ left: num ≤ den
	return int64(q)
}

// seedWindow counts units in conn's window [start, end) of c's tenant and
// kind, and reports whether it did: not when the clock has passed end
// since (the next decision seeds the next window) or the count is past
// MaxWindowUnits (then it denies every charge already).
func seedWindow(conn driver.Conn, c *driver.Charge, start, end, units int64) bool {
	// Edges whose only real window is [start, end): the two before it
	// last 1µs each and start at no calendar boundary.
	seed := []driver.Charge{{Kind: c.Kind, Tenant: c.Tenant, Window: driver.Window{
		Max: driver.MaxWindowUnits, Cost: min(units, driver.MaxWindowUnits),
		Edges: [4]int64{start - 2, start - 1, start, end}}}}
	res, err := conn.Hit(context.Background(), seed, nil)
	return err == nil && res.Outcome == driver.OK
}

// makeRoom makes room in sh (locked) for one more window: the ended ones
// go first, then, while it is still full, a sixteenth of it, any.
// A window forgotten has U = 0 again, the static share, and is seeded
// anew on top of its old seed: never more than the static share.
func (w *windows) makeRoom(sh *windowShard, now int64) {
	if len(sh.m) < w.cap {
		return
	}
	for k := range sh.m {
		if k.end <= now {
			delete(sh.m, k)
		}
	}
	for k := range sh.m {
		if len(sh.m) < w.cap-w.cap/16 {
			break
		}
		delete(sh.m, k)
	}
}

// forget drops what this node knows of tenant's windows (Reset).
func (w *windows) forget(tenant string) {
	sh := w.shard(tenant)
	sh.mu.Lock()
	for k := range sh.m {
		if k.tenant == tenant {
			delete(sh.m, k)
		}
	}
	sh.mu.Unlock()
}

// len is how many windows it remembers.
func (w *windows) len() int {
	n := 0
	for i := range w.shards {
		sh := &w.shards[i]
		sh.mu.Lock()
		n += len(sh.m)
		sh.mu.Unlock()
	}
	return n
}
