package fleetstore

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/gcra"
	"github.com/fleetstore/fleetstore/internal/checked"
	"github.com/fleetstore/fleetstore/internal/memstore"
	"github.com/fleetstore/fleetstore/observe"
)

// The local store: a memory driver of the fallback's own, so that no other
// Store can open it, on which it is memory://fallback.
const (
	localName   = "fallback"
	localPrefix = "local"
)

// fallback is a Store's degraded mode (CONTRACT §8): the breaker, the
// node-local store, the outbox and the probe that replays it.
type fallback struct {
	s     *Store
	cfg   Fallback
	share share
	mem   *memstore.Driver
	local driver.Conn // never blocks: called without a budget

	// Read by every call; written once an outage (or a count). Kept off
	// the cache line of localDecisions, which every local Hit writes.
	degraded       atomic.Bool // the breaker: calls go local
	obsPanicked    atomic.Bool // the observer panicked on a replay event: logged once
	claimsFull     atomic.Bool // the local store holds cfg.LocalClaims claims
	checkEvery     uint64      // local decisions between two counts of the local store's claims
	_              [64]byte
	localDecisions atomic.Uint64
	_              [56]byte

	// pendingUntil is the local clock's µs until which a claim taken
	// locally may still be pending here: after an outage, a Hit decided
	// shared first looks for such a claim (Peek), so that a provider's
	// retry meeting this node right after the switch back is Pending, not
	// a second admission of the hook the outage admitted locally.
	pendingUntil atomic.Int64
	clock        memstore.Clock

	fullLogged    atomic.Bool // "outbox full", once an outage
	refusedLogged atomic.Bool // "replayed commits refused", once an outage

	// stateMu orders the transitions and their log lines.
	stateMu sync.Mutex
	cause   error         // of the current outage
	since   time.Time     // of the current outage
	atTrip  observe.Stats // the counters when it began

	mu      sync.Mutex // box, running
	box     outbox
	running bool // a worker goroutine runs (ensureWorker)

	stopCtx context.Context // done at Close: the worker ends
	stop    context.CancelFunc
	wg      sync.WaitGroup

	kick chan struct{} // trip wakes a worker that waits for a parked commit

	// The worker's own: one worker runs at a time, handed over under mu.
	backoff     time.Duration
	recoveredAt time.Time
	forgetLater []Claim // replayed while the breaker was open (forget)
	batch       int     // claims per replayed Commit (replay)
	// The conflict log's GCRA bucket (conflict): its TAT in µs of s.now,
	// the conflicts not logged since the last line, and whether the
	// line saying they are not was logged (once a Store).
	logTAT      int64
	notLogged   uint64
	quietLogged bool

	outages, queuedN, replayed, conflicts, expired, dropped, claimsDropped atomic.Uint64

	chargeBufs sync.Pool // *[]Charge: a local Hit's charges at this node's share
}

func newFallback(s *Store, cfg *Fallback, clock memstore.Clock) (*fallback, error) {
	if clock == nil {
		clock = memstore.Monotonic
	}
	mem := memstore.New(clock)
	local, err := mem.Open(driver.Config{URL: &url.URL{Scheme: "memory", Host: localName},
		KeyPrefix: localPrefix, Timeout: s.timeout, Logger: s.log})
	if err != nil {
		return nil, err
	}
	fb := &fallback{s: s, cfg: *cfg, share: cfg.share(), mem: mem, local: local,
		box: outbox{size: cfg.OutboxSize}, batch: replayBatch, clock: clock,
		kick:       make(chan struct{}, 1),
		checkEvery: uint64(min(max(cfg.LocalClaims/16, 1), 256))}
	fb.stopCtx, fb.stop = context.WithCancel(context.Background())
	fb.chargeBufs.New = func() any { b := make([]Charge, 0, 8); return &b }
	return fb, nil
}

// errDegraded is the error of a call the breaker kept from the shared
// store (a Reset, a commit the outbox could not take).
func errDegraded(op string) error {
	return &opError{op: op, kind: ErrUnavailable,
		err: errors.New("degraded: the shared store is out, not tried")}
}

// hit is Store.Hit with the fallback, after validation: shared while the
// breaker is closed, local once it is open or when this call fails for an
// outage (CONTRACT §8).
func (fb *fallback) hit(ctx context.Context, charges []Charge, claim *Claim) (Result, error) {
	s := fb.s
	if !s.enter() {
		return Result{}, &opError{op: "hit", err: ErrClosed}
	}
	defer s.leave()
	if fb.degraded.Load() {
		if err := ctx.Err(); err != nil {
			return Result{}, &opError{op: "hit", err: doneErr(err)}
		}
		return fb.localHit(charges, claim)
	}
	if res, ok, err := fb.heldLocally(charges, claim); ok {
		return res, err
	}
	ctx, cancel, err := s.budget(ctx)
	if err != nil {
		return Result{}, &opError{op: "hit", err: err}
	}
	defer cancel()
	res, err := s.conn.Hit(ctx, charges, claim)
	if err == nil {
		return res, nil
	}
	degrade, e := s.failure(ctx, "hit", err)
	if !degrade {
		return Result{}, e
	}
	return fb.localHit(charges, claim)
}

// localHit decides a Hit from the local store at this node's share of
// every limit.
func (fb *fallback) localHit(charges []Charge, claim *Claim) (Result, error) {
	n := fb.localDecisions.Add(1)
	if claim != nil && fb.claimsAtCap(n) {
		claim = nil
		fb.claimsDropped.Add(1)
	}
	if len(charges) == 0 && claim == nil {
		return Result{Outcome: OK, Local: true}, nil
	}
	bufp := fb.chargeBufs.Get().(*[]Charge)
	local := (*bufp)[:0]
	for _, c := range charges {
		local = append(local, fb.share.charge(c))
	}
	res, err := fb.local.Hit(context.Background(), checked.ForDriver(local), claim)
	if err == nil {
		err = localQuota(&res, charges, local)
	}
	clear(local)
	*bufp = local[:0]
	fb.chargeBufs.Put(bufp)
	if err != nil { // the memory driver never fails; say so if it did
		err = fmt.Errorf("local store: %w", err)
		return Result{}, &opError{op: "hit", kind: ErrUnavailable, err: err}
	}
	if claim != nil && res.Outcome == OK {
		until := fb.clock() + claim.PendingTTL.Microseconds()
		for cur := fb.pendingUntil.Load(); until > cur; cur = fb.pendingUntil.Load() {
			if fb.pendingUntil.CompareAndSwap(cur, until) {
				break
			}
		}
	}
	res.Local = true
	return res, nil
}

// heldLocally answers a Hit decided shared after an outage when this node
// holds the claim pending locally for another hook: Pending, with the
// local claim's remaining time, nothing charged, and the local buckets of
// charges as they stand (G10, as localHit reports them). ok is false when
// the shared store is to decide (no local claim can be pending any more,
// or none is for this key and another hook).
func (fb *fallback) heldLocally(charges []Charge, claim *Claim) (res Result, ok bool, err error) {
	if claim == nil || fb.pendingUntil.Load() == 0 || fb.pendingUntil.Load() <= fb.clock() {
		return Result{}, false, nil
	}
	holder, left, pending := fb.mem.Peek(localName, localPrefix, *claim)
	if !pending || holder == claim.HookID {
		return Result{}, false, nil
	}
	res = Result{Outcome: Pending, RetryAfter: gcra.RetryAfter(left), Local: true}
	bufp := fb.chargeBufs.Get().(*[]Charge)
	local := (*bufp)[:0]
	for _, c := range charges {
		local = append(local, fb.share.charge(c))
	}
	fb.mem.Quota(localName, localPrefix, local, &res)
	err = localQuota(&res, charges, local)
	clear(local)
	*bufp = local[:0]
	fb.chargeBufs.Put(bufp)
	if err != nil {
		err = fmt.Errorf("local store: %w", err)
		return Result{}, true, &opError{op: "hit", kind: ErrUnavailable, err: err}
	}
	return res, true, nil
}

// claimsAtCap reports whether the local store holds LocalClaims claims,
// counting them every checkEvery local decisions (n is this one's number):
// the cap may be passed by that many.
func (fb *fallback) claimsAtCap(n uint64) bool {
	if n%fb.checkEvery == 0 {
		fb.countClaims()
	}
	return fb.claimsFull.Load()
}

func (fb *fallback) countClaims() {
	_, n := fb.mem.Size(localName, localPrefix)
	fb.claimsFull.Store(n >= fb.cfg.LocalClaims)
}

// settle is Store.settle with the fallback, after validation and enter:
// a Commit that cannot reach the shared store is queued and committed
// locally; a Release is made locally.
func (fb *fallback) settle(ctx context.Context, op string, claims []Claim,
	call settleFunc) (local bool, err error) {
	s := fb.s
	if fb.degraded.Load() {
		if err := ctx.Err(); err != nil {
			return false, &opError{op: op, err: doneErr(err)}
		}
		return true, joinSorted(fb.localSettle(op, claims, nil, errDegraded(op)))
	}
	ctx, cancel, err := s.budget(ctx)
	if err != nil {
		return false, &opError{op: op, err: err}
	}
	defer cancel()
	errs, err := call(ctx, claims)
	if err != nil {
		degrade, e := s.failure(ctx, op, err)
		if !degrade {
			return false, e
		}
		return true, joinSorted(fb.localSettle(op, claims, nil, e))
	}
	var out []int // claims that failed for an outage, each on its own
	var cause error
	failed := s.settled(ctx, op, claims, errs, func(i int, e error) bool {
		out = append(out, i)
		cause = e
		return true
	})
	if len(out) > 0 {
		fb.trip(cause)
		failed = append(failed, fb.localSettle(op, claims, out, cause)...)
	}
	if fb.pendingUntil.Load() > fb.clock() {
		// Settled in the shared store: a claim this node took locally
		// during the outage no longer answers for them (heldLocally).
		done := make([]Claim, 0, len(claims))
		for i := range claims {
			if !slices.Contains(out, i) {
				done = append(done, claims[i])
			}
		}
		fb.mem.Forget(localName, localPrefix, done...)
	}
	return len(out) > 0, joinSorted(failed)
}

// localSettle settles claims[idx] (every claim for a nil idx) in the local
// store. A commit is queued in the outbox and committed locally, so that a
// retry at this node is a Duplicate; one the outbox cannot take is not
// committed and fails with cause. A release is made locally only: a
// pending claim in the shared store expires by its PendingTTL. The
// failures are ClaimErrors by the claims' indices.
func (fb *fallback) localSettle(op string, claims []Claim, idx []int, cause error) []error {
	n := len(claims)
	if idx != nil {
		n = len(idx)
	}
	sub := make([]Claim, 0, n)
	at := make([]int, 0, n)
	for k := range n {
		i := k
		if idx != nil {
			i = idx[k]
		}
		sub, at = append(sub, claims[i]), append(at, i)
	}
	var failed []error
	bg := context.Background()
	if op == "release" {
		errs, _ := fb.local.Release(bg, sub)
		for j, err := range errs {
			if err != nil {
				c := &sub[j]
				failed = append(failed, &ClaimError{Index: at[j], Tenant: c.Tenant,
					SourceID: c.SourceID, Key: c.Key, Err: &opError{op: op, err: err}})
			}
		}
		return failed
	}
	now := time.Now()
	kept := make([]Claim, 0, len(sub))
	fb.mu.Lock()
	for j := range sub {
		c := &sub[j]
		if fb.box.push(queued{claim: *c, at: now}) {
			kept = append(kept, *c)
			continue
		}
		fb.dropped.Add(1)
		if !fb.fullLogged.Load() && fb.fullLogged.CompareAndSwap(false, true) {
			fb.s.log.Warn("fleetstore: outbox full; commits are not queued until it drains",
				zap.String("scheme", fb.s.scheme), zap.Int("outbox_size", fb.box.size))
		}
		failed = append(failed, &ClaimError{Index: at[j], Tenant: c.Tenant, SourceID: c.SourceID,
			Key: c.Key, Err: fmt.Errorf("%w; outbox full (%d commits), not queued", cause, fb.box.size)})
	}
	// Committed locally under mu: the replayer cannot take (and forget) a
	// commit before it is committed here.
	if len(kept) > 0 {
		_, _ = fb.local.Commit(bg, kept) // a claim another hook holds here is decided on replay
	}
	fb.mu.Unlock()
	fb.queuedN.Add(uint64(len(kept)))
	if len(kept) > 0 {
		// The worker may have closed the breaker and ended between this
		// call's look at it and the push: a queued commit always has a
		// worker to replay it.
		fb.ensureWorker()
	}
	return failed
}

// reset is Store.Reset with the fallback: the local buckets always, the
// shared ones unless the breaker is open.
func (fb *fallback) reset(ctx context.Context, tenant string) error {
	s := fb.s
	if !s.enter() {
		return &opError{op: "reset", err: ErrClosed}
	}
	_ = fb.local.Reset(context.Background(), tenant)
	degraded := fb.degraded.Load()
	s.leave()
	if degraded {
		if err := ctx.Err(); err != nil {
			return &opError{op: "reset", err: doneErr(err)}
		}
		return errDegraded("reset")
	}
	return s.call(ctx, "reset", func(ctx context.Context) error { return s.conn.Reset(ctx, tenant) })
}

// joinSorted joins ClaimErrors in the order of their claims.
func joinSorted(errs []error) error {
	slices.SortStableFunc(errs, func(a, b error) int {
		var x, y *ClaimError
		if errors.As(a, &x) && errors.As(b, &y) {
			return x.Index - y.Index
		}
		return 0
	})
	return errors.Join(errs...)
}

// trip opens the breaker: the first outage error of an outage logs it and
// starts the worker, which probes the shared store.
func (fb *fallback) trip(cause error) {
	if fb.degraded.Load() {
		return
	}
	fb.stateMu.Lock()
	if fb.degraded.Load() {
		fb.stateMu.Unlock()
		return
	}
	fb.cause, fb.since = cause, time.Now()
	fb.outages.Add(1)
	fb.atTrip = fb.stats()
	fb.fullLogged.Store(false)
	fb.refusedLogged.Store(false)
	fb.s.log.Warn("fleetstore: shared store out; deciding from this node until it is back",
		zap.String("scheme", fb.s.scheme), zap.String("url", fb.s.display), zap.Error(cause),
		zap.Int("nodes", fb.cfg.Nodes),
		zap.Float64("share", float64(fb.share.num)/float64(fb.share.den)))
	fb.degraded.Store(true)
	fb.stateMu.Unlock()
	fb.ensureWorker()
	select {
	case fb.kick <- struct{}{}:
	default:
	}
}

// recover closes the breaker after a probe reached the shared store and
// the outbox was replayed: one log line with the outage's figures.
func (fb *fallback) recover() {
	fb.stateMu.Lock()
	defer fb.stateMu.Unlock()
	now, st, was := time.Now(), fb.stats(), fb.atTrip
	fb.s.log.Info("fleetstore: shared store back; deciding shared again",
		zap.String("scheme", fb.s.scheme), zap.String("url", fb.s.display),
		zap.Duration("degraded_for", now.Sub(fb.since)),
		zap.Uint64("local_decisions", st.LocalDecisions-was.LocalDecisions),
		zap.Uint64("queued", st.Queued-was.Queued),
		zap.Uint64("replayed", st.Replayed-was.Replayed),
		zap.Uint64("conflicts", st.Conflicts-was.Conflicts),
		zap.Uint64("expired", st.Expired-was.Expired),
		zap.Uint64("dropped", st.Dropped-was.Dropped),
		zap.Uint64("claims_dropped", st.ClaimsDropped-was.ClaimsDropped),
		zap.Int("outbox", st.Outbox))
	fb.recoveredAt = now
	fb.degraded.Store(false)
}

// stats is Store.Stats.
func (fb *fallback) stats() observe.Stats {
	fb.mu.Lock()
	n := fb.box.len()
	fb.mu.Unlock()
	return observe.Stats{
		Degraded:       fb.degraded.Load(),
		Outages:        fb.outages.Load(),
		LocalDecisions: fb.localDecisions.Load(),
		Outbox:         n,
		Queued:         fb.queuedN.Load(),
		Replayed:       fb.replayed.Load(),
		Conflicts:      fb.conflicts.Load(),
		Expired:        fb.expired.Load(),
		Dropped:        fb.dropped.Load(),
		ClaimsDropped:  fb.claimsDropped.Load(),
	}
}

// close stops the worker, makes one last replay of what the outbox holds
// within one budget, and closes the local store. Commits still queued are
// lost with the process: their claims expire by PendingTTL.
func (fb *fallback) close() {
	fb.stop()
	fb.wg.Wait()
	fb.mu.Lock()
	fb.box.dueNow()
	n := fb.box.len()
	fb.mu.Unlock()
	if n > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), fb.s.timeout)
		fb.replay(ctx)
		cancel()
		fb.mu.Lock()
		n = fb.box.len()
		fb.mu.Unlock()
		if n > 0 {
			fb.s.log.Warn("fleetstore: closed with commits not replayed; their claims expire by PendingTTL",
				zap.String("scheme", fb.s.scheme), zap.Int("commits", n))
		}
	}
	_ = fb.local.Close()
}
