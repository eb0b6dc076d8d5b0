package degraded

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/internal/fault"
	"github.com/fleetstore/fleetstore/observe"
)

// The probe's backoff (CONTRACT §8): from minProbe, doubling, up to
// maxProbe, each wait drawn from [b/2, b]. An outage that begins within
// stableAfter of the last one's end continues that one's backoff, so that
// a store that flaps is probed (and logged) about once a second at most.
const (
	minProbe    = 25 * time.Millisecond
	maxProbe    = time.Second
	stableAfter = 5 * time.Second

	replayBatch    = 256 // claims per replayed Commit at most: one round trip per shard
	minReplayBatch = 8   // … and at least, when a batch outlasts the budget
	// maxReplayTries is how many replays of one commit the shared store
	// may answer with an error before the commit is dropped (Stats.Dropped):
	// a commit it will never take must not keep the node degraded.
	maxReplayTries = 8

	// minTTL is the least TTL a commit takes (CONTRACT §6): a queued
	// commit with less left is not replayed (Stats.Expired).
	minTTL = driver.MinTTL
)

// replayer is the degraded mode's one goroutine, the worker: while the
// breaker is open it probes the shared store and, once that answers,
// replays the outbox and closes the breaker; with the breaker closed it
// replays what is still queued and ends. It is started by the first
// outage or queued commit (ensure) and stopped at Close (halt). No call
// waits for it.
type replayer struct {
	fb *Conn

	stopCtx context.Context // done at Close: the worker ends
	stop    context.CancelFunc
	wg      sync.WaitGroup
	kick    chan struct{} // an outage wakes a worker that waits for a parked commit
	running bool          // a worker goroutine runs; under fb.mu

	// The worker's own: one worker runs at a time, handed over under fb.mu.
	batch       int            // claims per replayed Commit
	forgetLater []driver.Claim // replayed while the breaker was open (forget)
}

func newReplayer(fb *Conn) *replayer {
	r := &replayer{fb: fb, kick: make(chan struct{}, 1), batch: replayBatch}
	r.stopCtx, r.stop = context.WithCancel(context.Background())
	return r
}

// ensure starts the worker unless it runs (or the Store closed).
func (r *replayer) ensure() {
	r.fb.mu.Lock()
	defer r.fb.mu.Unlock()
	if r.running || r.stopCtx.Err() != nil {
		return
	}
	r.running = true
	r.wg.Add(1)
	go r.work()
}

// wake cuts short a worker's wait for a parked commit (an outage began).
func (r *replayer) wake() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// halt stops the worker and waits for it to end.
func (r *replayer) halt() {
	r.stop()
	r.wg.Wait()
}

// work is the worker's loop (replayer).
func (r *replayer) work() {
	defer r.wg.Done()
	fb, b := r.fb, r.fb.breaker
	for r.stopCtx.Err() == nil {
		if b.isOpen.Load() {
			if b.began(time.Now()) {
				r.notify(true, b.outage())
			}
			if !r.sleep(b.wait(rand.N[int64])) {
				return
			}
			if !r.probe() || !r.replay(r.stopCtx) {
				b.failed()
				continue
			}
			fb.recover()
			r.forgetDeferred()
			fb.local.countClaims() // the forgotten claims made room
			b.ended()
			r.notify(false, nil)
			continue
		}
		fb.mu.Lock()
		due, ok := fb.box.next()
		if !ok {
			r.running = false
			fb.mu.Unlock()
			return
		}
		fb.mu.Unlock()
		if wait := time.Until(due); wait > 0 {
			// Only commits waiting for another hook's pending claim: wait
			// for the first, or for an outage (wake).
			if !r.nap(wait) {
				return
			}
			continue
		}
		r.replay(r.stopCtx) // an outage trips the breaker: probing again
	}
}

// notify tells OnStateChange of a change, with a snapshot of the counters.
func (r *replayer) notify(degraded bool, cause error) {
	if on := r.fb.rules.OnStateChange; on != nil {
		on(degraded, cause, r.fb.Stats())
	}
}

// sleep waits d, or reports false when the Store closes first.
func (r *replayer) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.stopCtx.Done():
		return false
	}
}

// nap is sleep, cut short by wake.
func (r *replayer) nap(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.kick:
	case <-r.stopCtx.Done():
		return false
	}
	return true
}

// probe pings the shared store within one budget.
func (r *replayer) probe() bool {
	ctx, cancel := context.WithTimeout(r.stopCtx, r.fb.rules.Timeout)
	defer cancel()
	return r.fb.shared.Ping(ctx) == nil
}

// replay commits the outbox to the shared store, batch by batch, until it
// is empty (true) or a batch makes no progress (false; the breaker is then
// open). A batch the budget ran out in the middle of (a driver that
// settles claim by claim, memcached, on a slow machine) made progress: the
// next batches are halved, down to minReplayBatch, and grow back by
// doubling once they fit.
func (r *replayer) replay(ctx context.Context) bool {
	fb := r.fb
	for ctx.Err() == nil {
		fb.mu.Lock()
		batch := fb.box.takeDue(time.Now(), r.batch)
		batch = append(batch, fb.box.take(r.batch-len(batch))...)
		fb.mu.Unlock()
		if len(batch) == 0 {
			return true
		}
		res := r.replayBatch(ctx, batch)
		fb.mu.Lock()
		fb.box.done(len(batch), res.back)
		fb.box.park(res.parked)
		fb.mu.Unlock()
		fb.ack(res.acks)
		switch {
		case len(res.back) == 0:
			r.batch = min(2*r.batch, replayBatch)
		case res.progress():
			r.batch = max(r.batch/2, minReplayBatch)
		default:
			if res.cause != nil {
				fb.trip(res.cause)
			}
			return false
		}
	}
	return false
}

// replayed is what the replay of one batch did with its commits.
type replayed struct {
	back    []queued       // to keep queued
	parked  []waiting      // met another hook's pending claim: replayed again later
	acks    []uint64       // the log seqs of those settled
	forget  []driver.Claim // those settled: the shared store keeps them now
	refused bool           // the store answered some commit with an error reply
	cause   error          // why some were kept: an outage (nil: none, or the Store is closing)
	failed  int            // commits whose replay failed: kept for an error, or dropped
	failure error          // the first one's error
}

// fail counts a commit whose replay failed with err.
func (r *replayed) fail(err error) {
	if r.failed++; r.failure == nil {
		r.failure = err
	}
}

// settled takes q out of the outbox for good.
func (r *replayed) settled(q *queued) {
	r.forget = append(r.forget, q.claim)
	if q.seq != 0 {
		r.acks = append(r.acks, q.seq)
	}
}

// progress reports whether any commit left the queue, or the store
// answered: a refusal is progress, not a reason to wait for the probe.
func (r *replayed) progress() bool {
	return len(r.forget) > 0 || len(r.parked) > 0 || r.refused
}

// replayBatch commits batch with each claim's TTL less the time since its
// Commit (the expiry the commit gave it; one whose TTL has passed is not
// sent), and reports what became of each (replayed). A commit that met
// another hook's committed claim is a conflict: counted, logged, handed
// to OnConflict. What the shared store now holds is forgotten locally.
func (r *replayer) replayBatch(ctx context.Context, batch []queued) (res replayed) {
	claims, sent := r.unexpired(batch, &res)
	defer func() { r.forget(res.forget) }()
	if len(claims) == 0 {
		return res
	}
	cctx, cancel := context.WithTimeout(ctx, r.fb.rules.Timeout)
	defer cancel()
	start := time.Now()
	errs, err := r.fb.shared.Commit(cctx, claims)
	took := time.Since(start)
	if err != nil {
		for _, i := range sent {
			res.back = append(res.back, batch[i])
			res.fail(err)
		}
		if ctx.Err() == nil {
			_, kind := fault.Classify(cctx, err)
			res.cause = fault.Wrap("replay", kind, err)
		}
	} else {
		for j, err := range errs {
			r.answered(ctx, cctx, batch[sent[j]], claims[j:j+1], err, &res)
		}
	}
	if r.fb.rules.Observe != nil {
		r.observe(cctx, start, took, len(claims), &res)
	}
	return res
}

// unexpired returns the claims of batch to send, each with its TTL less
// the time since its Commit, and their indexes in batch; one whose TTL
// ran out in the queue is settled in res without a replay (Stats.Expired).
func (r *replayer) unexpired(batch []queued, res *replayed) (claims []driver.Claim, sent []int) {
	now := time.Now()
	claims = make([]driver.Claim, 0, len(batch))
	sent = make([]int, 0, len(batch))
	for i := range batch {
		q := &batch[i]
		ttl := q.claim.TTL - now.Sub(q.at)
		if ttl < minTTL {
			r.fb.n.expired.Add(1)
			res.settled(q)
			continue
		}
		c := q.claim
		c.TTL = ttl
		claims, sent = append(claims, c), append(sent, i)
	}
	return claims, sent
}

// answered reads the shared store's answer err to the replay of q, whose
// claim as sent is sent[0], within cctx (the batch's budget inside ctx),
// into res.
func (r *replayer) answered(ctx, cctx context.Context, q queued, sent []driver.Claim, err error,
	res *replayed) {
	var holder string
	var wait time.Duration
	if lost := (*driver.ClaimLostError)(nil); errors.As(err, &lost) {
		if res.cause != nil { // an outage met in this batch: ask again later
			res.back = append(res.back, q)
			res.fail(res.cause)
			return
		}
		holder, wait, err = r.settleLost(ctx, sent[0])
	}
	switch {
	case wait > 0:
		res.parked = append(res.parked, waiting{q: q, due: time.Now().Add(wait)})
	case holder != "":
		r.conflict(q, holder)
		res.settled(&q)
	case err == nil:
		r.fb.n.replayed.Add(1)
		r.fb.local.recent.add(sent, nil)
		res.settled(&q)
	default:
		c, kind := fault.Classify(cctx, err)
		res.fail(err)
		switch {
		case c != fault.Answered:
			res.back = append(res.back, q)
			if ctx.Err() == nil {
				res.cause = fault.Wrap("replay", kind, err)
			}
		case r.refusedTooOften(&q, err):
			res.settled(&q)
		default:
			res.back = append(res.back, q)
		}
		res.refused = res.refused || c == fault.Answered
	}
}

// refusedTooOften counts a refusal (an error reply) of q's replay and
// reports whether q is to be dropped: refused maxReplayTries times
// (Stats.Dropped; the first such is logged, naming the error).
func (r *replayer) refusedTooOften(q *queued, err error) bool {
	if q.tries++; q.tries < maxReplayTries {
		return false
	}
	fb := r.fb
	fb.n.dropped.Add(1)
	if !fb.refusedLogged.Load() && fb.refusedLogged.CompareAndSwap(false, true) {
		fb.log.Warn("fleetstore: replayed commits refused too often are dropped "+
			"(the first is named; Stats counts them)",
			zap.String("scheme", fb.rules.Scheme), zap.Int("tries", int(q.tries)), zap.Error(err))
	}
	return true
}

// settleLost asks the shared store what the claim c (its TTL what is left
// of it) that a replayed Commit found held by another hook (ErrClaimLost)
// is held as: the answer does not say pending or committed. A Hit of the
// claim alone under c's hook_id (no charge) asks, within one budget:
//
//   - Duplicate naming another hook: committed; holder names it (a
//     conflict, final). Naming c's hook: committed for it (no conflict).
//   - Pending: the other hook may still release it, or its node die and
//     the claim expire; the commit waits (wait > 0, the claim's remaining
//     pending time, between minProbe and maxProbe, so that a release is
//     met within about a second) and is replayed again then.
//   - OK: the claim was freed in between and is now pending for c's hook
//     (C1, expiring two budgets from now); the Commit that follows, within
//     the same budget, commits it (C5): no other hook can take it between.
//
// err is the Hit's or the Commit's error (ErrClaimLost if another hook
// took the freed claim first: the next replay asks again).
func (r *replayer) settleLost(ctx context.Context, c driver.Claim) (holder string,
	wait time.Duration, err error) {
	timeout := r.fb.rules.Timeout
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c.PendingTTL = min(c.TTL, 2*timeout)
	res, err := r.fb.shared.Hit(cctx, nil, &c)
	if err != nil {
		return "", 0, err
	}
	switch res.Outcome {
	case driver.Duplicate:
		if res.HookID == c.HookID {
			return "", 0, nil
		}
		return res.HookID, 0, nil
	case driver.Pending:
		return "", min(max(res.RetryAfter, minProbe), maxProbe), nil
	}
	errs, err := r.fb.shared.Commit(cctx, []driver.Claim{c})
	if err != nil {
		return "", 0, err
	}
	return "", 0, errs[0]
}

// forget drops replayed commits from the local store, which the shared
// store now keeps. While the breaker is open they stay until it closes:
// a retry that reaches this node before then must still be a Duplicate
// here, not a hook admitted twice.
func (r *replayer) forget(claims []driver.Claim) {
	if len(claims) == 0 {
		return
	}
	if r.fb.breaker.isOpen.Load() {
		r.forgetLater = append(r.forgetLater, claims...)
		return
	}
	r.fb.local.forget(claims...)
}

// forgetDeferred forgets what replays made while the breaker was open, once
// it is closed.
func (r *replayer) forgetDeferred() {
	r.fb.local.forget(r.forgetLater...)
	clear(r.forgetLater)
	r.forgetLater = r.forgetLater[:0]
}

// conflict reports a replayed commit that met another hook's committed
// claim: the outage let one provider event in twice. It is counted,
// logged (conflictLog) and handed to OnConflict.
func (r *replayer) conflict(q queued, holder string) {
	r.fb.n.conflicts.Add(1)
	r.fb.conflicts.add(&q.claim, holder, q.at)
	if on := r.fb.rules.OnConflict; on != nil {
		on(q.claim, holder, q.at)
	}
}

// observe reports a replayed batch of n commits, sent at start within
// ctx and answered after took, to the observer: failed as res says,
// classed as the Store would return its first failure. A conflict or a commit parked
// behind another hook's pending claim is an outcome, not a failure. It
// runs on the worker, where an observer's panic would end the process: it
// is recovered, the event dropped, and the first one logged (its value's
// type only: the value may hold anything).
func (r *replayer) observe(ctx context.Context, start time.Time, took time.Duration, n int,
	res *replayed) {
	fb := r.fb
	defer func() {
		if p := recover(); p != nil && fb.obsPanicked.CompareAndSwap(false, true) {
			fb.log.Error("fleetstore: the observer panicked on a replay event; "+
				"the event is dropped, further panics are not logged",
				zap.String("scheme", fb.rules.Scheme),
				zap.String("panic_type", fmt.Sprintf("%T", p)))
		}
	}()
	e := observe.Event{Op: observe.OpReplay, Start: start, Duration: took, Claims: n,
		Failed: res.failed}
	if res.failure != nil {
		_, kind := fault.Classify(ctx, res.failure)
		e.Class = observe.ClassOf(fault.Wrap("replay", kind, res.failure))
	}
	fb.rules.Observe(ctx, e)
}
