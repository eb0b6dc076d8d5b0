package degraded

import (
	"context"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/gcra"
	"github.com/fleetstore/fleetstore/internal/checked"
	"github.com/fleetstore/fleetstore/internal/memstore"
)

// The local store: a memory driver of the fallback's own, so that no other
// Store can open it, on which it is memory://fallback.
const (
	localName   = "fallback"
	localPrefix = "local"
)

// localStore is the node-local store the degraded mode decides from
// (CONTRACT §8): a memory store of its own, every charge taken at this
// node's share of its limit, at most about maxClaims claims, and the
// index of this node's recent commits, seeded into it when a Hit meets
// one. Its calls never block and never fail.
type localStore struct {
	mem    *memstore.Driver
	conn   driver.Conn
	share  Share
	clock  memstore.Clock
	recent *recent // this node's recent commits
	// windows holds the counts of quota windows the shared store
	// reported, and seeds the local counts from them (CONTRACT §8.2).
	windows *windows
	n       *counters

	maxClaims  int
	claimsFull atomic.Bool // the store holds maxClaims claims
	checkEvery uint64      // local decisions between two counts of its claims

	// pendingUntil is the clock's µs until which a claim taken here may
	// still be pending: after an outage, a Hit decided shared first looks
	// for such a claim (held), so that a provider's retry meeting this
	// node right after the switch back is Pending, not a second admission
	// of the hook the outage admitted here.
	pendingUntil atomic.Int64

	chargeBufs sync.Pool // *[]driver.Charge: a Hit's charges at this node's share
}

func newLocalStore(rules *Rules, clock memstore.Clock, n *counters) (*localStore, error) {
	mem := memstore.New(clock)
	conn, err := mem.Open(driver.Config{URL: &url.URL{Scheme: "memory", Host: localName},
		KeyPrefix: localPrefix, Timeout: rules.Timeout, Logger: rules.Logger})
	if err != nil {
		return nil, err
	}
	l := &localStore{mem: mem, conn: conn, share: rules.Share, clock: clock, n: n,
		recent:     newRecent(rules.RecentCommits, clock),
		windows:    newWindows(rules.Share, clock, maxWindows),
		maxClaims:  rules.LocalClaims,
		checkEvery: uint64(min(max(rules.LocalClaims/16, 1), 256))}
	l.chargeBufs.New = func() any { b := make([]driver.Charge, 0, 8); return &b }
	return l, nil
}

// hit decides a Hit at this node's share of every limit.
func (l *localStore) hit(charges []driver.Charge, claim *driver.Claim) (driver.Result, error) {
	n := l.n.localDecisions.Add(1)
	// A claim this node committed before the outage is seeded, and then
	// decided here; it adds no claim of its own.
	seeded := claim != nil && l.seed(claim)
	if claim != nil && !seeded && l.atCap(n) {
		claim = nil
		l.n.claimsDropped.Add(1)
	}
	if len(charges) == 0 && claim == nil {
		return driver.Result{Outcome: driver.OK, Local: true}, nil
	}
	l.windows.prepare(l.conn, charges)
	bufp, local := l.atShare(charges)
	res, err := checked.HitShadowed(context.Background(), l.conn, local, claim)
	if err == nil {
		err = localQuota(&res, charges, local)
	}
	l.putShare(bufp, local)
	if err != nil { // the memory driver never fails; say so if it did
		return driver.Result{}, localFailed(err)
	}
	if claim != nil && res.Outcome == driver.OK {
		until := l.clock() + claim.PendingTTL.Microseconds()
		for cur := l.pendingUntil.Load(); until > cur; cur = l.pendingUntil.Load() {
			if l.pendingUntil.CompareAndSwap(cur, until) {
				break
			}
		}
	}
	res.Local = true
	return res, nil
}

// peek answers a Peek at this node's share of every limit: the buckets
// that decide this node's next local Hit, as hit reports them.
func (l *localStore) peek(charges []driver.Charge) driver.Result {
	l.windows.prepare(l.conn, charges)
	bufp, local := l.atShare(charges)
	defer l.putShare(bufp, local)
	var res driver.Result
	l.mem.Quota(localName, localPrefix, local, &res)
	_ = checked.PeekQuota(&res, local) // the memory store's states: whole µs, within a capacity
	localHeadroom(&res, charges, local)
	res.Local = true
	return res
}

// held answers a Hit decided shared after an outage when this node holds
// the claim pending for another hook: Pending, with the claim's remaining
// time, nothing charged, and the buckets of charges as they stand here
// (G10, as hit reports them). ok is false when the shared store is to
// decide (no claim can be pending here any more, or none is for this key
// and another hook).
func (l *localStore) held(charges []driver.Charge, claim *driver.Claim) (res driver.Result,
	ok bool, err error) {
	if claim == nil || !l.mayHoldPending() {
		return driver.Result{}, false, nil
	}
	holder, left, pending := l.mem.Peek(localName, localPrefix, *claim)
	if !pending || holder == claim.HookID {
		return driver.Result{}, false, nil
	}
	res = driver.Result{Outcome: driver.Pending, RetryAfter: gcra.RetryAfter(left), Local: true}
	l.windows.prepare(l.conn, charges)
	bufp, local := l.atShare(charges)
	l.mem.Quota(localName, localPrefix, local, &res)
	err = localQuota(&res, charges, local)
	l.putShare(bufp, local)
	if err != nil {
		return driver.Result{}, true, localFailed(err)
	}
	return res, true, nil
}

// mayHoldPending reports whether a claim taken here may still be pending.
func (l *localStore) mayHoldPending() bool {
	until := l.pendingUntil.Load()
	return until != 0 && until > l.clock()
}

// atShare returns charges at this node's share (CONTRACT §8) in a
// pooled buffer, bufp, to give back with putShare.
func (l *localStore) atShare(charges []driver.Charge) (bufp *[]driver.Charge,
	local []driver.Charge) {
	bufp = l.chargeBufs.Get().(*[]driver.Charge)
	local = (*bufp)[:0]
	for _, c := range charges {
		local = append(local, l.share.Charge(c))
	}
	return bufp, local
}

// putShare gives atShare's buffer back, cleared (the charges' tenants
// are the caller's strings).
func (l *localStore) putShare(bufp *[]driver.Charge, local []driver.Charge) {
	clear(local)
	*bufp = local[:0]
	l.chargeBufs.Put(bufp)
}

// atCap reports whether the store holds maxClaims claims, counting them
// every checkEvery local decisions (n is this one's number): the cap may
// be passed by that many.
func (l *localStore) atCap(n uint64) bool {
	if n%l.checkEvery == 0 {
		l.countClaims()
	}
	return l.claimsFull.Load()
}

// countClaims counts the claims the store holds against maxClaims.
func (l *localStore) countClaims() {
	l.claimsFull.Store(l.claims() >= l.maxClaims)
}

// claims is how many claims the store holds, swept or not.
func (l *localStore) claims() int {
	_, n := l.mem.Size(localName, localPrefix)
	return n
}

// seed makes the store hold claim c committed when the index says this
// node committed it, so that the Hit that follows decides it as the
// shared store would (a Duplicate naming the committer, after its
// charges: C4). It reports whether it did.
func (l *localStore) seed(c *driver.Claim) bool {
	hookID, left, ok := l.recent.committer(c)
	if !ok {
		return false
	}
	seed := driver.Claim{Tenant: c.Tenant, SourceID: c.SourceID, Key: c.Key, HookID: hookID,
		TTL: time.Duration(left) * time.Microsecond}
	// Committing an absent claim records it (C7); one held here already
	// (committed, or pending for the committer) answers as it is.
	_, _ = l.conn.Commit(context.Background(), []driver.Claim{seed})
	return true
}

// commit commits claims here, so that a retry at this node is a
// Duplicate (a claim another hook holds here is decided on replay).
func (l *localStore) commit(claims []driver.Claim) {
	_, _ = l.conn.Commit(context.Background(), claims)
}

// release releases claims here only, setting the result of claims[j] in
// errs[at[j]]: a pending claim in the shared store expires by its
// PendingTTL.
func (l *localStore) release(claims []driver.Claim, at []int, errs []error) {
	results, _ := l.conn.Release(context.Background(), claims)
	for j := range at {
		errs[at[j]] = nil
		if j < len(results) {
			errs[at[j]] = results[j]
		}
	}
}

// forget drops claims the shared store keeps now.
func (l *localStore) forget(claims ...driver.Claim) {
	l.mem.Forget(localName, localPrefix, claims...)
}

// reset forgets tenant's buckets and windows here, and the counts of its
// windows the shared store reported.
func (l *localStore) reset(tenant string) {
	_ = l.conn.Reset(context.Background(), tenant)
	l.windows.forget(tenant)
}

func (l *localStore) close() { _ = l.conn.Close() }
