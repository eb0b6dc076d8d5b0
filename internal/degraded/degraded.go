// Package degraded is a Store's degraded mode (CONTRACT §8), a decorator
// of the shared store's Conn: the breaker, the node-local store at this
// node's share of every limit, the outbox and the worker that probes the
// shared store and replays the outbox, the conflict log, and the look at
// claims taken locally after the switch back. New takes the Conn it wraps
// and plain rules; its Conn returns plain driver results and errors, which
// the Store classifies and wraps as any driver's (internal/fault).
package degraded

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/internal/fault"
	"github.com/fleetstore/fleetstore/internal/memstore"
	"github.com/fleetstore/fleetstore/internal/outboxlog"
	"github.com/fleetstore/fleetstore/observe"
)

// Shared is the shared store's Conn as the degraded mode calls it: Hit
// and Peek return checked Results (internal/checked), and NeedsTimer
// tells whether a call needs a budget timer (false for a driver that
// never blocks).
type Shared interface {
	driver.Conn
	driver.Peeker
	NeedsTimer() bool
}

// Rules are the degraded mode's (fleetstore.Fallback gives them; the
// Store has checked every field).
type Rules struct {
	Share       Share // this node's share of every limit
	Nodes       int   // the fleet's size, 0 when Share was given as a fraction (logged)
	OutboxSize  int   // commits the outbox holds, > 0
	LocalClaims int   // claims the local store holds, > 0
	// RecentCommits is how many of this node's recent commits the index
	// holds (recent), > 0.
	RecentCommits int
	// OutboxDir, when set, keeps the outbox on disk too (internal/outboxlog):
	// New replays what it holds before deciding shared.
	OutboxDir string
	// OnConflict, when set, is told of every replayed commit that met
	// another hook's committed claim: the commit as queued, the holder's
	// hook_id and when Commit queued it.
	OnConflict func(c driver.Claim, holder string, queuedAt time.Time)
	// OnStateChange, when set, is told when the Store goes degraded (with
	// the outage's cause, an error as the Store returns one) and when it
	// decides shared again.
	OnStateChange func(degraded bool, cause error, st observe.Stats)
	// Observe, when set, is told of every replayed batch (observe.OpReplay).
	Observe func(context.Context, observe.Event)

	Logger      *zap.Logger
	Scheme, URL string           // for log lines; URL redacted
	Timeout     time.Duration    // the per-call budget of a call to the shared store (T1)
	Clock       memstore.Clock   // the local store's µs; nil: memstore.Monotonic
	Now         func() time.Time // the conflict log's clock; nil: time.Now
}

// Conn is a Store's degraded mode (CONTRACT §8) around the shared store's
// Conn: the breaker, the node-local store, the outbox and the worker that
// probes the shared store and replays it. It bounds each call to the
// shared store by Rules.Timeout itself, so that a call it decides locally
// arms no timer (NeedsTimer). Its errors are the shared store's, marked
// ErrTimeout when its own budget passed, or its own marked as a driver
// marks them (ErrUnavailable, an error reply).
type Conn struct {
	shared     Shared
	needsTimer bool // shared.NeedsTimer()
	rules      Rules
	log        *zap.Logger
	local      *localStore
	breaker    *breaker
	replayer   *replayer
	n          counters
	conflicts  conflictLog

	obsPanicked   atomic.Bool // the observer panicked on a replay event: logged once
	fullLogged    atomic.Bool // "outbox full", once an outage
	refusedLogged atomic.Bool // "replayed commits refused", once an outage

	mu  sync.Mutex // box, and the replayer's running
	box outbox

	disk       *outboxlog.Log // the outbox's log on disk (Rules.OutboxDir), or nil
	diskLogged atomic.Bool    // its first failure was logged: once a Store
}

// New returns the degraded mode of rules around shared, which it owns: its
// Close closes shared. The breaker starts closed, unless rules.OutboxDir
// holds commits from before.
func New(shared Shared, rules Rules) (*Conn, error) {
	clock := rules.Clock
	if clock == nil {
		clock = memstore.Monotonic
	}
	now := rules.Now
	if now == nil {
		now = time.Now
	}
	fb := &Conn{shared: shared, needsTimer: shared.NeedsTimer(), rules: rules, log: rules.Logger,
		box:       outbox{size: rules.OutboxSize},
		breaker:   newBreaker(minProbe, maxProbe, stableAfter),
		conflicts: conflictLog{log: rules.Logger, scheme: rules.Scheme, now: now}}
	var err error
	if fb.local, err = newLocalStore(&rules, clock, &fb.n); err != nil {
		return nil, err
	}
	fb.replayer = newReplayer(fb)
	if rules.OutboxDir != "" {
		if err := fb.restore(rules.OutboxDir); err != nil {
			fb.local.close()
			return nil, err
		}
	}
	return fb, nil
}

// NeedsTimer reports false: the Store arms no budget timer around a call
// of Conn, which bounds its calls to the shared store itself.
func (fb *Conn) NeedsTimer() bool { return false }

// restore opens the outbox's log in dir and queues the commits it holds,
// oldest first, each with the time its Commit queued it (by the wall
// clock: its TTL keeps running across the restart) and committed locally,
// so that a retry at this node is a Duplicate. With any, the breaker
// starts open: the Store decides shared only once they are replayed.
// Past OutboxSize the oldest are dropped (Stats.Dropped) and acknowledged.
func (fb *Conn) restore(dir string) error {
	disk, recs, err := outboxlog.Open(dir, outboxlog.Options{Logger: fb.log})
	if err != nil {
		return fmt.Errorf("outbox dir: %w", err)
	}
	extra := max(len(recs)-fb.box.size, 0)
	if extra > 0 {
		seqs := make([]uint64, extra)
		for i := range seqs {
			seqs[i] = recs[i].Seq
		}
		if err := disk.Ack(seqs...); err != nil {
			_ = disk.Close()
			return fmt.Errorf("outbox dir: %w", err)
		}
		recs = recs[extra:]
	}
	fb.disk = disk
	if len(recs) == 0 {
		return nil
	}
	now := time.Now()
	claims := make([]driver.Claim, 0, len(recs))
	for _, r := range recs {
		fb.box.push(queued{claim: r.Claim, at: r.QueuedAt, seq: r.Seq})
		c := r.Claim
		if c.TTL -= now.Sub(r.QueuedAt); c.TTL >= minTTL { // else Expired at the replay
			claims = append(claims, c)
		}
	}
	fb.local.commit(claims)
	cause := fmt.Errorf("%d commits queued in %s before this Open await replay", len(recs), dir)
	if extra > 0 {
		cause = fmt.Errorf("%w (%d more, past the outbox's size, dropped)", cause, extra)
	}
	// Counted within the outage they open: its figures include them.
	fb.open(cause, "fleetstore: outbox holds commits from before this Open; "+
		"deciding from this node until they are replayed", func() {
		fb.n.queued.Add(uint64(len(recs)))
		fb.n.dropped.Add(uint64(extra))
	})
	return nil
}

// errDegraded is the error of a call the breaker kept from the shared
// store (a Reset, a commit the outbox could not take).
var errDegraded = fmt.Errorf("%w: degraded: the shared store is out, not tried",
	driver.ErrUnavailable)

// localFailed is the error of a call the local store failed (the memory
// driver never fails; it says so if it did).
func localFailed(err error) error {
	return driver.ErrorReply(fmt.Errorf("local store: %w", err))
}

// budget bounds a call to the shared store by the budget (T1).
func (fb *Conn) budget(ctx context.Context) (context.Context, context.CancelFunc, error) {
	return fault.Budget(ctx, fb.rules.Timeout, fb.needsTimer)
}

// sort reads err, a call to the shared store's failure for op within ctx,
// its budget: degrade reports an outage to decide locally on; e is err as
// the Store is to classify it outside that budget (marked ErrTimeout when
// it is this budget that passed); cause is err as the Store returns it,
// for the breaker's log line and OnStateChange.
func sort(ctx context.Context, op string, err error) (degrade bool, e, cause error) {
	c, kind := fault.Classify(ctx, err)
	e = err
	if kind == driver.ErrTimeout {
		e = fmt.Errorf("%w: %w", driver.ErrTimeout, err)
	}
	return fault.Degradable(c, kind), e, fault.Wrap(op, kind, err)
}

// failed is sort, opening the breaker on an outage.
func (fb *Conn) failed(ctx context.Context, op string, err error) (degrade bool, e error) {
	degrade, e, cause := sort(ctx, op, err)
	if degrade {
		fb.trip(cause)
	}
	return degrade, e
}

// Hit is Store.Hit with the fallback, after validation: shared while the
// breaker is closed, local once it is open or when this call fails for an
// outage (CONTRACT §8). The Store has checked ctx; the shared call gets
// the budget.
func (fb *Conn) Hit(ctx context.Context, charges []driver.Charge,
	claim *driver.Claim) (driver.Result, error) {
	if fb.breaker.isOpen.Load() {
		return fb.local.hit(charges, claim)
	}
	if res, ok, err := fb.local.held(charges, claim); ok {
		return res, err
	}
	ctx, cancel, err := fb.budget(ctx)
	if err != nil {
		return driver.Result{}, err
	}
	defer cancel()
	res, err := fb.shared.Hit(ctx, charges, claim)
	if err == nil {
		fb.local.windows.saw(charges, &res)
		if claim != nil && res.Outcome == driver.Duplicate {
			// Remembered, so that the same event at this node during an
			// outage is a Duplicate too.
			fb.local.recent.told(claim, res.HookID)
		}
		return res, nil
	}
	if !fb.local.windows.holdAll(charges) {
		_, e, _ := sort(ctx, "hit", err) // no local decision either: no outage
		return driver.Result{}, e
	}
	if degrade, e := fb.failed(ctx, "hit", err); !degrade {
		return driver.Result{}, e
	}
	return fb.local.hit(charges, claim)
}

// Commit is CommitWhere without saying where.
func (fb *Conn) Commit(ctx context.Context, claims []driver.Claim) ([]error, error) {
	errs, _, err := fb.CommitWhere(ctx, claims)
	return errs, err
}

// CommitWhere is Store.Commit with the fallback, after validation
// (CONTRACT §8): a commit that cannot reach the shared store is queued and
// committed locally. local reports whether any claim was settled or
// failed in the local store (observe.Event.Local).
func (fb *Conn) CommitWhere(ctx context.Context, claims []driver.Claim) (errs []error,
	local bool, err error) {
	return fb.settle(ctx, "commit", claims, fb.sharedCommit)
}

// sharedCommit is the shared store's Commit; what it commits enters the
// index of this node's recent commits.
func (fb *Conn) sharedCommit(ctx context.Context, claims []driver.Claim) ([]error, error) {
	errs, err := fb.shared.Commit(ctx, claims)
	if err == nil && len(errs) == len(claims) {
		fb.local.recent.add(claims, errs)
	}
	return errs, err
}

// Release is ReleaseWhere without saying where.
func (fb *Conn) Release(ctx context.Context, claims []driver.Claim) ([]error, error) {
	errs, _, err := fb.ReleaseWhere(ctx, claims)
	return errs, err
}

// ReleaseWhere is Store.Release with the fallback, after validation: a
// release that cannot reach the shared store is made locally; local
// reports whether any was.
func (fb *Conn) ReleaseWhere(ctx context.Context, claims []driver.Claim) (errs []error,
	local bool, err error) {
	return fb.settle(ctx, "release", claims, fb.shared.Release)
}

// settle is Commit or Release: one result per claim; local reports
// claims settled in the local store.
func (fb *Conn) settle(ctx context.Context, op string, claims []driver.Claim,
	call func(context.Context, []driver.Claim) ([]error, error)) (errs []error, local bool,
	err error) {
	if fb.breaker.isOpen.Load() {
		return fb.localSettle(op, claims, nil, errDegraded, make([]error, len(claims))), true, nil
	}
	ctx, cancel, err := fb.budget(ctx)
	if err != nil {
		return nil, false, err
	}
	defer cancel()
	errs, err = call(ctx, claims)
	if err != nil {
		degrade, e := fb.failed(ctx, op, err)
		if !degrade {
			return nil, false, e
		}
		return fb.localSettle(op, claims, nil, e, make([]error, len(claims))), true, nil
	}
	var out []int // claims that failed for an outage, each on its own
	var outErr, cause error
	for i, err := range errs {
		if err == nil {
			continue
		}
		if degrade, e, c := sort(ctx, op, err); degrade {
			out, outErr, cause = append(out, i), e, c
		}
	}
	if len(out) > 0 {
		fb.trip(cause)
		fb.localSettle(op, claims, out, outErr, errs)
	}
	if fb.local.mayHoldPending() {
		fb.forgetSettled(claims, out)
	}
	return errs, len(out) > 0, nil
}

// forgetSettled forgets in the local store the claims that the shared
// store settled, all but those of out: a claim this node took locally
// during the outage no longer answers for them (heldLocally).
func (fb *Conn) forgetSettled(claims []driver.Claim, out []int) {
	done := make([]driver.Claim, 0, len(claims))
	for i := range claims {
		if !slices.Contains(out, i) {
			done = append(done, claims[i])
		}
	}
	fb.local.forget(done...)
}

// localSettle settles claims[idx] (every claim for a nil idx) in the local
// store, setting each one's result in errs and returning errs: a release
// is made locally (localRelease), a commit queued (queue); cause is why
// the shared store did not take them.
func (fb *Conn) localSettle(op string, claims []driver.Claim, idx []int, cause error,
	errs []error) []error {
	n := len(claims)
	if idx != nil {
		n = len(idx)
	}
	sub := make([]driver.Claim, 0, n)
	at := make([]int, 0, n)
	for k := range n {
		i := k
		if idx != nil {
			i = idx[k]
		}
		sub, at = append(sub, claims[i]), append(at, i)
	}
	if op == "release" {
		fb.local.release(sub, at, errs)
	} else {
		fb.queue(sub, at, cause, errs)
	}
	return errs
}

// queue queues commits in the outbox (on disk first, with OutboxDir) and
// commits them locally, so that a retry at this node is a Duplicate,
// setting the result of claims[j] in errs[at[j]]. One the outbox cannot
// take is not committed and fails with cause.
func (fb *Conn) queue(claims []driver.Claim, at []int, cause error, errs []error) {
	now := time.Now()
	fb.mu.Lock()
	kept, keptAt := fb.reserve(claims, at, cause, errs)
	var seqs []uint64
	if fb.disk != nil && len(kept) > 0 {
		// On disk before it counts as queued; the fsync never under mu.
		fb.mu.Unlock()
		var err error
		if seqs, err = fb.append(kept, now); err != nil {
			fb.unreserve(keptAt, cause, err, errs)
			return
		}
		fb.mu.Lock()
	}
	for j := range kept {
		q := queued{claim: kept[j], at: now}
		if seqs != nil {
			q.seq = seqs[j]
		}
		fb.box.pushReserved(q)
		errs[keptAt[j]] = nil
	}
	// Committed locally under mu: the replayer cannot take (and forget) a
	// commit before it is committed here.
	if len(kept) > 0 {
		fb.local.commit(kept)
	}
	fb.mu.Unlock()
	fb.n.queued.Add(uint64(len(kept)))
	if len(kept) > 0 {
		// The worker may have closed the breaker and ended between this
		// call's look at it and the push: a queued commit always has a
		// worker to replay it.
		fb.replayer.ensure()
	}
}

// reserve takes room in the outbox (under mu) for each of claims it can,
// returning them and their places in errs; one it cannot take fails with
// cause (Stats.Dropped; the first an outage is logged).
func (fb *Conn) reserve(claims []driver.Claim, at []int, cause error, errs []error) (
	kept []driver.Claim, keptAt []int) {
	kept = make([]driver.Claim, 0, len(claims))
	keptAt = make([]int, 0, len(claims))
	for j := range claims {
		if fb.box.reserve() {
			kept, keptAt = append(kept, claims[j]), append(keptAt, at[j])
			continue
		}
		fb.n.dropped.Add(1)
		if !fb.fullLogged.Load() && fb.fullLogged.CompareAndSwap(false, true) {
			fb.log.Warn("fleetstore: outbox full; commits are not queued until it drains",
				zap.String("scheme", fb.rules.Scheme), zap.Int("outbox_size", fb.box.size))
		}
		errs[at[j]] = fmt.Errorf("%w; outbox full (%d commits), not queued", cause, fb.box.size)
	}
	return kept, keptAt
}

// unreserve gives back the room reserved for the commits of errs[at...]
// that the outbox's log failed to take (err), and fails them with cause.
func (fb *Conn) unreserve(at []int, cause, err error, errs []error) {
	fb.mu.Lock()
	fb.box.unreserve(len(at))
	fb.mu.Unlock()
	fb.n.dropped.Add(uint64(len(at)))
	fb.diskFailed(err)
	for _, i := range at {
		errs[i] = fmt.Errorf("%w; outbox dir %s: %w, not queued", cause, fb.rules.OutboxDir, err)
	}
}

// append writes claims, queued at at, to the outbox's log and returns
// their records' seqs once they are on disk.
func (fb *Conn) append(claims []driver.Claim, at time.Time) ([]uint64, error) {
	recs := make([]outboxlog.Record, len(claims))
	for i := range claims {
		recs[i] = outboxlog.Record{Claim: claims[i], QueuedAt: at}
	}
	if err := fb.disk.Append(recs); err != nil {
		return nil, err
	}
	seqs := make([]uint64, len(recs))
	for i := range recs {
		seqs[i] = recs[i].Seq
	}
	return seqs, nil
}

// ack marks settled commits' records in the outbox's log (outside mu). A
// failure leaves them to be replayed again at the next Open, where the
// shared store finds them committed by their own hook: no conflict.
func (fb *Conn) ack(seqs []uint64) {
	if fb.disk == nil || len(seqs) == 0 {
		return
	}
	if err := fb.disk.Ack(seqs...); err != nil {
		fb.diskFailed(err)
	}
}

// diskFailed logs the outbox log's first failure: the log takes nothing
// after one (outboxlog.Log.Append), so every later commit that needs it
// fails with it, and the line is not repeated.
func (fb *Conn) diskFailed(err error) {
	if !fb.diskLogged.Load() && fb.diskLogged.CompareAndSwap(false, true) {
		fb.log.Error("fleetstore: outbox directory failed; commits are not queued "+
			"until the Store is opened again (their Commits fail with this error)",
			zap.String("scheme", fb.rules.Scheme), zap.String("dir", fb.rules.OutboxDir),
			zap.Error(err))
	}
}

// Reset is Store.Reset with the fallback: the local buckets always, the
// shared ones unless the breaker is open (then ErrUnavailable at once).
func (fb *Conn) Reset(ctx context.Context, tenant string) error {
	fb.local.reset(tenant)
	if fb.breaker.isOpen.Load() {
		return errDegraded
	}
	return fb.sharedCall(ctx, "reset", func(ctx context.Context) error {
		return fb.shared.Reset(ctx, tenant)
	})
}

// Ping asks the shared store whatever the breaker says; one that fails for
// an outage opens the breaker.
func (fb *Conn) Ping(ctx context.Context) error {
	return fb.sharedCall(ctx, "ping", fb.shared.Ping)
}

// sharedCall runs f, a call to the shared store, within the budget; an
// outage opens the breaker.
func (fb *Conn) sharedCall(ctx context.Context, op string, f func(context.Context) error) error {
	ctx, cancel, err := fb.budget(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	if err := f(ctx); err != nil {
		_, e := fb.failed(ctx, op, err)
		return e
	}
	return nil
}

// Close stops the worker, makes one last replay of the outbox within one
// budget, closes the local store and then the shared store's Conn.
func (fb *Conn) Close() error {
	fb.close()
	return fb.shared.Close()
}

// Stats returns a snapshot of the degraded mode's state and counters
// (CONTRACT §8). Safe to call at any time, also after Close.
func (fb *Conn) Stats() observe.Stats {
	fb.mu.Lock()
	n := fb.box.len()
	fb.mu.Unlock()
	return fb.n.snapshot(fb.breaker.isOpen.Load(), n)
}

// LocalClaims is how many claims the local store holds, swept or not.
func (fb *Conn) LocalClaims() int { return fb.local.claims() }

// trip opens the breaker: the first outage error of an outage logs it and
// starts the worker, which probes the shared store.
func (fb *Conn) trip(cause error) {
	if fb.breaker.isOpen.Load() {
		return
	}
	fb.open(cause, "fleetstore: shared store out; deciding from this node until it is back", nil)
}

// open is trip, logging msg; count, when set, counts what the outage
// begins with (restore), after the snapshot its figures start from.
func (fb *Conn) open(cause error, msg string, count func()) {
	opened := fb.breaker.open(cause, time.Now(), func() observe.Stats {
		fb.n.outages.Add(1)
		was := fb.Stats()
		if count != nil {
			count()
		}
		fb.fullLogged.Store(false)
		fb.refusedLogged.Store(false)
		fb.log.Warn(msg,
			zap.String("scheme", fb.rules.Scheme), zap.String("url", fb.rules.URL),
			zap.Error(cause), zap.Int("nodes", fb.rules.Nodes),
			zap.Float64("share", fb.rules.Share.Fraction()))
		return was
	})
	if opened {
		fb.replayer.ensure()
		fb.replayer.wake()
	}
}

// recover closes the breaker after a probe reached the shared store and
// the outbox was replayed: one log line with the outage's figures.
func (fb *Conn) recover() {
	now := time.Now()
	fb.breaker.close(now, func(since time.Time, was observe.Stats) {
		st := fb.Stats()
		fb.log.Info("fleetstore: shared store back; deciding shared again",
			zap.String("scheme", fb.rules.Scheme), zap.String("url", fb.rules.URL),
			zap.Duration("degraded_for", now.Sub(since)),
			zap.Uint64("local_decisions", st.LocalDecisions-was.LocalDecisions),
			zap.Uint64("queued", st.Queued-was.Queued),
			zap.Uint64("replayed", st.Replayed-was.Replayed),
			zap.Uint64("conflicts", st.Conflicts-was.Conflicts),
			zap.Uint64("expired", st.Expired-was.Expired),
			zap.Uint64("dropped", st.Dropped-was.Dropped),
			zap.Uint64("claims_dropped", st.ClaimsDropped-was.ClaimsDropped),
			zap.Int("outbox", st.Outbox))
	})
}

// close stops the worker, makes one last replay of what the outbox holds
// within one budget, and closes the local store and the outbox's log.
// Commits still queued are lost with the process (their claims expire by
// PendingTTL), or kept in the outbox's directory for the next Open.
func (fb *Conn) close() {
	fb.replayer.halt()
	fb.mu.Lock()
	fb.box.dueNow()
	n := fb.box.len()
	fb.mu.Unlock()
	if n > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), fb.rules.Timeout)
		fb.replayer.replay(ctx)
		cancel()
		fb.mu.Lock()
		n = fb.box.len()
		fb.mu.Unlock()
		switch {
		case n > 0 && fb.disk != nil:
			fb.log.Warn("fleetstore: closed with commits not replayed; "+
				"they are kept in the outbox directory for the next Open",
				zap.String("scheme", fb.rules.Scheme), zap.Int("commits", n),
				zap.String("dir", fb.rules.OutboxDir))
		case n > 0:
			fb.log.Warn("fleetstore: closed with commits not replayed; "+
				"their claims expire by PendingTTL",
				zap.String("scheme", fb.rules.Scheme), zap.Int("commits", n))
		}
	}
	if fb.disk != nil {
		if err := fb.disk.Close(); err != nil {
			fb.diskFailed(err)
		}
	}
	fb.local.close()
}
