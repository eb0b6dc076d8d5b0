package degraded

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"go.uber.org/zap"

	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/gcra"
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

	// The conflict log is a GCRA bucket over the Store's life: a burst of
	// ConflictLogBurst lines, then one every conflictLogEvery at most, so
	// that a store that flaps cannot fill the log; every conflict is
	// counted (Stats.Conflicts) and handed to OnConflict all the same.
	ConflictLogBurst = 10
	conflictLogEvery = time.Minute

	// minTTL is the least TTL a commit takes (CONTRACT §6): a queued
	// commit with less left is not replayed (Stats.Expired).
	minTTL = driver.MinTTL
)

// ensureWorker starts the worker unless it runs (or the Store closed).
func (fb *Conn) ensureWorker() {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	if fb.running || fb.stopCtx.Err() != nil {
		return
	}
	fb.running = true
	fb.wg.Add(1)
	go fb.work()
}

// work is the one goroutine of the fallback. While the breaker is open it
// probes the shared store with Ping and, once that answers, replays the
// outbox and closes the breaker. With the breaker closed it replays what
// is still queued (a commit queued as the breaker closed) and ends when
// the outbox is empty. No call waits for it.
func (fb *Conn) work() {
	defer fb.wg.Done()
	notified := false
	for fb.stopCtx.Err() == nil {
		if fb.degraded.Load() {
			if !notified {
				notified = true
				fb.began()
			}
			if !fb.sleep(fb.backoff/2 + rand.N(fb.backoff/2+1)) {
				return
			}
			if !fb.probe() || !fb.replay(fb.stopCtx) {
				fb.backoff = min(2*fb.backoff, maxProbe)
				continue
			}
			fb.recover()
			fb.forgetDeferred()
			fb.countClaims() // the forgotten claims made room
			notified = false
			fb.notify(false, nil)
			continue
		}
		fb.mu.Lock()
		due, ok := fb.box.next()
		if !ok {
			fb.running = false
			fb.mu.Unlock()
			return
		}
		fb.mu.Unlock()
		if wait := time.Until(due); wait > 0 {
			// Only commits waiting for another hook's pending claim: wait
			// for the first, or for an outage (trip kicks).
			if !fb.nap(wait) {
				return
			}
			continue
		}
		fb.replay(fb.stopCtx) // an outage trips the breaker: probing again
	}
}

// began starts the worker's part of an outage: its backoff and the state
// change callback.
func (fb *Conn) began() {
	if fb.recoveredAt.IsZero() || time.Since(fb.recoveredAt) > stableAfter {
		fb.backoff = minProbe
	} else {
		fb.backoff = min(2*max(fb.backoff, minProbe), maxProbe)
	}
	fb.stateMu.Lock()
	cause := fb.cause
	fb.stateMu.Unlock()
	fb.notify(true, cause)
}

// notify tells OnStateChange of a change, with a snapshot of the counters.
func (fb *Conn) notify(degraded bool, cause error) {
	if fb.cfg.OnStateChange != nil {
		fb.cfg.OnStateChange(degraded, cause, fb.stats())
	}
}

// sleep waits d, or reports false when the Store closes first.
func (fb *Conn) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-fb.stopCtx.Done():
		return false
	}
}

// nap is sleep, cut short by a kick (trip: an outage began).
func (fb *Conn) nap(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-fb.kick:
	case <-fb.stopCtx.Done():
		return false
	}
	return true
}

// probe pings the shared store within one budget.
func (fb *Conn) probe() bool {
	ctx, cancel := context.WithTimeout(fb.stopCtx, fb.cfg.Timeout)
	defer cancel()
	return fb.shared.Ping(ctx) == nil
}

// replay commits the outbox to the shared store, batch by batch, until it
// is empty (true) or a batch makes no progress (false; the breaker is then
// open). A batch the budget ran out in the middle of (a driver that
// settles claim by claim, memcached, on a slow machine) made progress: the
// next batches are halved, down to minReplayBatch, and grow back by
// doubling once they fit.
func (fb *Conn) replay(ctx context.Context) bool {
	for ctx.Err() == nil {
		fb.mu.Lock()
		batch := fb.box.takeDue(time.Now(), fb.batch)
		batch = append(batch, fb.box.take(fb.batch-len(batch))...)
		fb.mu.Unlock()
		if len(batch) == 0 {
			return true
		}
		back, parked, acks, progress, cause := fb.replayBatch(ctx, batch)
		fb.mu.Lock()
		fb.box.done(len(batch), back)
		fb.box.park(parked)
		fb.mu.Unlock()
		fb.ack(acks)
		switch {
		case len(back) == 0:
			fb.batch = min(2*fb.batch, replayBatch)
		case progress:
			fb.batch = max(fb.batch/2, minReplayBatch)
		default:
			if cause != nil {
				fb.trip(cause)
			}
			return false
		}
	}
	return false
}

// replayBatch commits batch with each claim's TTL less the time since its
// Commit (the expiry the commit gave it; one whose TTL has passed is not
// sent), and returns the commits to keep queued, those to park (they met
// another hook's pending claim), the log seqs of those settled (to Ack),
// whether any left the queue, and why the others did not (nil when the
// Store is closing). A commit that met
// another hook's committed claim is a conflict: counted, logged, handed
// to OnConflict. What the shared store now holds is forgotten locally.
func (fb *Conn) replayBatch(ctx context.Context, batch []queued) (back []queued,
	parked []waiting, acks []uint64, progress bool, cause error) {
	now := time.Now()
	claims := make([]driver.Claim, 0, len(batch))
	sent := make([]int, 0, len(batch)) // batch index of each claim
	forget := make([]driver.Claim, 0, len(batch))
	settled := func(q *queued) { // out of the outbox for good
		forget = append(forget, q.claim)
		if q.seq != 0 {
			acks = append(acks, q.seq)
		}
	}
	refused := false // the store answered some commit with an error reply
	for i := range batch {
		q := &batch[i]
		ttl := q.claim.TTL - now.Sub(q.at)
		if ttl < minTTL {
			fb.expired.Add(1)
			settled(q)
			continue
		}
		c := q.claim
		c.TTL = ttl
		claims, sent = append(claims, c), append(sent, i)
	}
	defer func() { fb.forget(forget) }()
	if len(claims) == 0 {
		return nil, nil, acks, true, nil
	}
	cctx, cancel := context.WithTimeout(ctx, fb.cfg.Timeout)
	defer cancel()
	start := time.Now()
	errs, err := fb.shared.Commit(cctx, claims)
	if fb.cfg.Observe != nil {
		fb.observeReplay(cctx, start, len(claims), errs, err)
	}
	if err != nil {
		for _, i := range sent {
			back = append(back, batch[i])
		}
		if ctx.Err() == nil {
			_, _, cause = fb.classify(cctx, "replay", err)
		}
		return back, nil, acks, len(forget) > 0, cause
	}
	for j, err := range errs {
		q := batch[sent[j]]
		var holder string
		var wait time.Duration
		if lost := (*driver.ClaimLostError)(nil); errors.As(err, &lost) {
			if cause != nil { // an outage met in this batch: ask again later
				back = append(back, q)
				continue
			}
			holder, wait, err = fb.settleLost(ctx, claims[j])
		}
		switch {
		case wait > 0:
			parked = append(parked, waiting{q: q, due: time.Now().Add(wait)})
		case holder != "":
			fb.conflict(q, holder)
			settled(&q)
		case err == nil:
			fb.replayed.Add(1)
			fb.recent.add(claims[j:j+1], nil)
			settled(&q)
		default:
			answered, _, e := fb.classify(cctx, "replay", err)
			switch {
			case !answered:
				back = append(back, q)
				if ctx.Err() == nil {
					cause = e
				}
			case fb.refusedTooOften(&q, err):
				settled(&q)
			default:
				back = append(back, q)
			}
			// The store answered: it is reachable, and a refusal is
			// progress, not a reason to wait for the probe.
			refused = refused || answered
		}
	}
	return back, parked, acks, len(forget) > 0 || len(parked) > 0 || refused, cause
}

// refusedTooOften counts a refusal (an error reply) of q's replay and
// reports whether q is to be dropped: refused maxReplayTries times
// (Stats.Dropped; the first such is logged, naming the error).
func (fb *Conn) refusedTooOften(q *queued, err error) bool {
	if q.tries++; q.tries < maxReplayTries {
		return false
	}
	fb.dropped.Add(1)
	if !fb.refusedLogged.Load() && fb.refusedLogged.CompareAndSwap(false, true) {
		fb.log.Warn("fleetstore: replayed commits refused too often are dropped "+
			"(the first is named; Stats counts them)",
			zap.String("scheme", fb.cfg.Scheme), zap.Int("tries", int(q.tries)), zap.Error(err))
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
func (fb *Conn) settleLost(ctx context.Context, c driver.Claim) (holder string, wait time.Duration,
	err error) {
	cctx, cancel := context.WithTimeout(ctx, fb.cfg.Timeout)
	defer cancel()
	c.PendingTTL = min(c.TTL, 2*fb.cfg.Timeout)
	res, err := fb.shared.Hit(cctx, nil, &c)
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
	errs, err := fb.shared.Commit(cctx, []driver.Claim{c})
	if err != nil {
		return "", 0, err
	}
	return "", 0, errs[0]
}

// forget drops replayed commits from the local store, which the shared
// store now keeps. While the breaker is open they stay until it closes:
// a retry that reaches this node before then must still be a Duplicate
// here, not a hook admitted twice.
func (fb *Conn) forget(claims []driver.Claim) {
	if len(claims) == 0 {
		return
	}
	if fb.degraded.Load() {
		fb.forgetLater = append(fb.forgetLater, claims...)
		return
	}
	fb.mem.Forget(localName, localPrefix, claims...)
}

// forgetDeferred forgets what replays made while the breaker was open, once
// it is closed.
func (fb *Conn) forgetDeferred() {
	fb.mem.Forget(localName, localPrefix, fb.forgetLater...)
	clear(fb.forgetLater)
	fb.forgetLater = fb.forgetLater[:0]
}

// conflict reports a replayed commit that met another hook's committed
// claim: the outage let one provider event in twice. It is counted and
// handed to OnConflict; it is logged with the claim's identity (never a
// body: the Store has none), cut as errors cut it, while the conflict
// log's bucket allows, and the next line logged says how many were not.
func (fb *Conn) conflict(q queued, holder string) {
	fb.conflicts.Add(1)
	const every = int64(conflictLogEvery / time.Microsecond)
	d := gcra.Charge(fb.now().UnixMicro(), fb.logTAT, every, ConflictLogBurst*every)
	if d.Conform {
		fb.logTAT = d.TAT
		c := &q.claim
		fb.log.Warn("fleetstore: replayed commit met another hook's claim; "+
			"the outage let this event in twice",
			zap.String("scheme", fb.cfg.Scheme), zap.String("tenant", cut(c.Tenant)),
			zap.String("source_id", cut(c.SourceID)), zap.String("key", cut(c.Key)),
			zap.String("hook_id", cut(c.HookID)), zap.String("holder", cut(holder)),
			zap.String("node", cut(c.Node)), zap.Time("queued_at", q.at),
			zap.Uint64("not_logged", fb.notLogged))
		fb.notLogged = 0
	} else {
		if fb.notLogged++; !fb.quietLogged {
			fb.quietLogged = true
			fb.log.Warn("fleetstore: further replay conflicts are counted (Stats.Conflicts), "+
				"not logged, beyond one a minute",
				zap.String("scheme", fb.cfg.Scheme), zap.Int("burst", ConflictLogBurst))
		}
	}
	if fb.cfg.OnConflict != nil {
		fb.cfg.OnConflict(q.claim, holder, q.at)
	}
}

// cut keeps the first 64 characters of s, as ClaimError's message does
// (%.64q), never half of one.
func cut(s string) string {
	n := 0
	for i := range s {
		if n == 64 {
			return s[:i]
		}
		n++
	}
	return s
}

// observeReplay reports a replayed batch of n commits to the observer:
// failed as errs and err say, classed as the Store would return them.
// It runs on the probe goroutine, where an observer's panic would end the
// process: it is recovered, the event dropped, and the first one logged
// (its value's type only: the value may hold anything).
func (fb *Conn) observeReplay(ctx context.Context, start time.Time, n int, errs []error,
	err error) {
	defer func() {
		if r := recover(); r != nil && fb.obsPanicked.CompareAndSwap(false, true) {
			fb.log.Error("fleetstore: the observer panicked on a replay event; "+
				"the event is dropped, further panics are not logged",
				zap.String("scheme", fb.cfg.Scheme),
				zap.String("panic_type", fmt.Sprintf("%T", r)))
		}
	}()
	e := observe.Event{Op: observe.OpReplay, Start: start, Duration: time.Since(start), Claims: n}
	first := err
	if err != nil {
		e.Failed = n
	} else {
		for _, err := range errs {
			if err != nil {
				if e.Failed++; first == nil {
					first = err
				}
			}
		}
	}
	if first != nil {
		_, _, err := fb.classify(ctx, "replay", first)
		e.Class = observe.ClassOf(err)
	}
	fb.cfg.Observe(ctx, e)
}
