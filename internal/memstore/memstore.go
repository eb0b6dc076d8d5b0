// Package memstore is the in-process store behind the memory driver: the
// reference implementation of CONTRACT.md, sharded by tenant, each shard
// under its own lock, with expired buckets, claims and quota windows
// swept from a shard as it is written. Package drivers/memory is its
// public face (Driver, New, Clock, Monotonic, Default). This package adds
// what only this repository uses: the Store's fallback keeps its node-local store in a
// Driver and reads and trims it with Peek, Quota, Forget and Size, which
// no Store call can do.
package memstore

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fleetstore/fleetstore/claim"
	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/gcra"
)

// Clock returns the current time in µs. It must never go backwards.
type Clock func() int64

var origin = time.Now()

// Monotonic is the default Clock: wall-clock µs at process start plus the
// monotonic time elapsed since.
func Monotonic() int64 { return origin.UnixMicro() + time.Since(origin).Microseconds() }

// Driver is the memory driver's implementation (package drivers/memory
// wraps it).
type Driver struct {
	now   Clock
	mu    sync.Mutex
	named map[string]*named // by namedKey
}

// New returns a memory driver reading time from now (nil: Monotonic).
func New(now Clock) *Driver {
	if now == nil {
		now = Monotonic
	}
	return &Driver{now: now, named: make(map[string]*named)}
}

var _ driver.Driver = (*Driver)(nil)

// Open implements driver.Driver. The URL's host is the store's NAME; a path
// or any parameter but the common ones is ErrInvalid. No I/O.
func (d *Driver) Open(cfg driver.Config) (driver.Conn, error) {
	u := cfg.URL
	if err := driver.CheckParams(u.Query()); err != nil {
		return nil, err
	}
	if u.Path != "" && u.Path != "/" {
		return nil, driver.Invalid("url: path", "memory URLs have no path: use memory://NAME")
	}
	if u.User != nil {
		return nil, driver.Invalid("url: user", "memory URLs take no user or password")
	}
	if u.Opaque != "" {
		return nil, driver.Invalid("url", "want memory:// or memory://NAME")
	}
	if u.Host == "" {
		return &conn{st: newState(d.now)}, nil
	}
	key := namedKey(u.Host, cfg.KeyPrefix)
	return &conn{st: d.acquire(key), release: func() { d.release(key) }}, nil
}

// named is the state of memory://NAME, shared by the Stores open on it.
type named struct {
	st   *state
	refs int
}

// acquire returns the state of key, made on first use, and counts one
// more Store on it.
func (d *Driver) acquire(key string) *state {
	d.mu.Lock()
	defer d.mu.Unlock()
	n, ok := d.named[key]
	if !ok {
		n = &named{st: newState(d.now)}
		d.named[key] = n
	}
	n.refs++
	return n.st
}

// release counts one Store off key's state and forgets the state with the
// last one, as SQLite forgets a shared in-memory database: memory://NAME
// lives while a Store is open on it.
func (d *Driver) release(key string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if n, ok := d.named[key]; ok {
		if n.refs--; n.refs <= 0 {
			delete(d.named, key)
		}
	}
}

// namedKey identifies memory://NAME opened with key_prefix: NUL cannot be
// in a URL host, so the pair maps to one key.
func namedKey(name, keyPrefix string) string { return name + "\x00" + keyPrefix }

func (d *Driver) lookup(name, keyPrefix string) (*state, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	n, ok := d.named[namedKey(name, keyPrefix)]
	if !ok {
		return nil, false
	}
	return n.st, true
}

// Records returns the live records of tenant, "bucket",
// "window/KIND/START" (a quota's count) and "claim/SOURCE/KEY" with their
// remaining time to live, in every named store (memory://NAME) open with
// keyPrefix. It is conformance.Config.Records for this driver, whose
// random key_prefix names one store (G7, C9, Q5). Records of private
// stores (memory://) are not reachable. It never fails.
func (d *Driver) Records(_ context.Context, keyPrefix, tenant string) ([]driver.Record, error) {
	var out []driver.Record
	for _, st := range d.withPrefix(keyPrefix) {
		out = append(out, st.records(tenant)...)
	}
	return out, nil
}

// withPrefix returns the states of the named stores open with keyPrefix.
func (d *Driver) withPrefix(keyPrefix string) []*state {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []*state
	for key, n := range d.named {
		if _, p, _ := strings.Cut(key, "\x00"); p == keyPrefix {
			out = append(out, n.st)
		}
	}
	return out
}

// Size returns how many bucket records (a tenant's buckets, or its quota
// windows) and claims the named store holds, live or not yet swept: the
// memory it keeps.
func (d *Driver) Size(name, keyPrefix string) (buckets, claims int) {
	st, ok := d.lookup(name, keyPrefix)
	if !ok {
		return 0, 0
	}
	for i := range st.shards {
		sh := &st.shards[i]
		sh.mu.Lock()
		buckets += len(sh.buckets) + len(sh.windows)
		claims += len(sh.claims)
		sh.mu.Unlock()
	}
	return buckets, claims
}

func (st *state) records(tenant string) []driver.Record {
	sh := st.shard(tenant)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now := st.now()
	var out []driver.Record
	if b, ok := sh.buckets[tenant]; ok && b.expires > now {
		out = append(out, driver.Record{Key: "bucket", TTL: micros(b.expires - now)})
	}
	if w, ok := sh.windows[tenant]; ok {
		for _, c := range w.counts {
			if c.end > now {
				key := "window/" + c.kind + "/" + strconv.FormatInt(c.start, 10)
				out = append(out, driver.Record{Key: key, TTL: micros(c.end - now)})
			}
		}
	}
	for id, c := range sh.claims {
		if id.tenant == tenant && c.Live(now) {
			key := "claim/" + id.source + "/" + id.key
			out = append(out, driver.Record{Key: key, TTL: micros(c.Expires - now)})
		}
	}
	return out
}

func micros(us int64) time.Duration { return time.Duration(us) * time.Microsecond }

// Peek reports the claim on cl's key in the named store opened with
// keyPrefix: the hook holding it pending and the µs it has left, when it
// is pending and live. It writes nothing. The degraded mode looks at its
// local claims with it after an outage.
func (d *Driver) Peek(name, keyPrefix string, cl driver.Claim) (holder string, left int64,
	pending bool) {
	st, ok := d.lookup(name, keyPrefix)
	if !ok {
		return "", 0, false
	}
	sh := st.shard(cl.Tenant)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	c, ok := sh.claims[claimID{cl.Tenant, cl.SourceID, cl.Key}]
	now := st.now()
	if !ok || c.Phase != claim.Pending || !c.Live(now) {
		return "", 0, false
	}
	return c.HookID, c.Expires - now, true
}

// Quota sets r's bucket states to those of charges' buckets in the named
// store opened with keyPrefix, as they stand (CONTRACT G10: each
// reset-after, a window's count, and NBuckets), writing nothing: what a
// Hit that charged nothing reports. A store not open reports full
// buckets and empty windows; a window charge whose windows do not hold
// the store's clock leaves every state zero. At most driver.MaxCharges
// charges.
func (d *Driver) Quota(name, keyPrefix string, charges []driver.Charge, r *driver.Result) {
	st, ok := d.lookup(name, keyPrefix)
	if !ok {
		r.NBuckets = len(charges)
		clear(r.Buckets[:])
		return
	}
	_ = st.quota(charges, r)
}

// quota sets r's bucket states to those of charges' buckets as they
// stand, writing nothing (no sweep either): conn.Peek and Driver.Quota.
// A window charge whose windows do not hold now is errOutside, every
// state left zero.
func (st *state) quota(charges []driver.Charge, r *driver.Result) error {
	r.NBuckets = len(charges)
	clear(r.Buckets[:])
	if len(charges) == 0 {
		return nil
	}
	tenant := charges[0].Tenant
	sh := st.shard(tenant)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now := st.now()
	b, w := sh.buckets[tenant], sh.windows[tenant]
	for i := range charges {
		ch := &charges[i]
		if !ch.IsWindow() {
			r.Buckets[i].ResetAfter = micros(gcra.ResetAfter(now, b.tat(string(ch.Kind), now)))
			continue
		}
		start, end, err := window(ch, now)
		if err != nil {
			clear(r.Buckets[:])
			return err
		}
		r.Buckets[i].Used, r.Buckets[i].ResetAfter = w.used(string(ch.Kind), start, now), micros(end-now)
	}
	return nil
}

// Forget deletes the claims of the named store opened with key_prefix
// that are held by their own hook_id, pending or committed, and returns
// how many it deleted; a claim absent, expired or held by another hook is
// left as it is. It is not a settle of CONTRACT §4 (Release never deletes
// a committed claim): the Store's fallback uses it on its private local
// store to drop what the shared store now keeps.
func (d *Driver) Forget(name, keyPrefix string, claims ...driver.Claim) int {
	st, ok := d.lookup(name, keyPrefix)
	if !ok {
		return 0
	}
	n := 0
	for i := range claims {
		cl := &claims[i]
		sh := st.shard(cl.Tenant)
		id := claimID{cl.Tenant, cl.SourceID, cl.Key}
		sh.mu.Lock()
		if c, ok := sh.claims[id]; ok && c.HookID == cl.HookID {
			delete(sh.claims, id)
			n++
		}
		sh.mu.Unlock()
	}
	return n
}
