package postgres

import (
	"context"
	"slices"

	"github.com/fleetstore/fleetstore/driver"
)

// Group commit, as on Redis (internal/rediscore's group.go, whose rules
// hold here word for word): the Commits and Releases of a Conn of at most
// maxGrouped claims go to the server in rounds, one round in flight at a
// time. A call that finds no round in flight sends its claims at once,
// alone; calls that arrive meanwhile queue, and the caller whose round
// comes back hands the next round (every call queued, up to maxRound
// claims) to one of them, which sends it as one call of settle_v1. The
// round runs on the latest deadline of its calls; a call returns by its
// own deadline; a call whose context ends before its round is sent is
// taken out and never sent (T1, T5). settle_v1 settles every claim in one
// transaction: a round that fails (no answer, a lock timeout) settled
// nothing, and is each of its calls' whole failure.

// maxRound bounds the claims of one round.
const maxRound = 128

// maxGrouped is the most claims of a call that goes in a round; a larger
// call is sent at once, beside the rounds.
const maxGrouped = 16

// settleState is where a settle call is in its round; conn.mu guards it.
type settleState uint8

const (
	queued  settleState = iota // waiting for a round
	picked                     // in a round not yet sent
	sent                       // in a round on the wire
	settled                    // its results are set
	left                       // its caller returned on its context's end
)

// settleCall is one Commit or Release: its claims and its results.
type settleCall struct {
	ctx    context.Context
	commit bool
	claims []driver.Claim
	n      int
	wake   chan *round // cap 1: a round to send, or nil when its results are set
	state  settleState // guarded by conn.mu
	round  *round      // its round once picked; guarded by conn.mu
	errs   []error     // per claim, or nil with err: the whole call's failure
	err    error
}

// round is the settle calls sent together, and the one that sends them.
type round struct {
	calls []*settleCall
	exec  *settleCall
}

// settle runs a Commit (commit true) or Release of claims in a round.
func (c *conn) settle(ctx context.Context, commit bool, claims []driver.Claim) ([]error, error) {
	if len(claims) == 0 { // the Store sends none; nothing to send
		return nil, nil
	}
	s := newSettleCall(ctx, commit, claims)
	if len(claims) > maxGrouped {
		res := c.sendRound(ctx, []*settleCall{s})
		return res[0].errs, res[0].err
	}
	c.mu.Lock()
	if !c.busy {
		c.busy = true
		r := &round{calls: []*settleCall{s}, exec: s}
		s.state, s.round = picked, r
		c.mu.Unlock()
		c.send(s, r)
		return s.errs, s.err
	}
	s.wake = make(chan *round, 1)
	c.queue = append(c.queue, s)
	c.mu.Unlock()
	select {
	case r := <-s.wake:
		if r != nil {
			c.send(s, r)
		}
	case <-ctx.Done():
		c.leave(s)
	}
	return s.errs, s.err
}

func newSettleCall(ctx context.Context, commit bool, claims []driver.Claim) *settleCall {
	return &settleCall{ctx: ctx, commit: commit, claims: claims, n: len(claims)}
}

// leave takes s, whose context has ended, out of its round: it is not
// sent when it was not yet, and the round's answer for it is dropped when
// it was. The round s was to send goes to another of its calls, or, when
// none is left, the next round starts.
func (c *conn) leave(s *settleCall) {
	c.mu.Lock()
	var exec *settleCall
	var next *round
	switch s.state {
	case settled: // the answer came first
		c.mu.Unlock()
		return
	case queued:
		for i, q := range c.queue {
			if q == s {
				c.queue = slices.Delete(c.queue, i, i+1)
				break
			}
		}
	case picked:
		if r := s.round; r.exec == s {
			r.exec = nil
			for _, q := range r.calls {
				if q != s && q.state == picked && (r.exec == nil || later(q.ctx, r.exec.ctx)) {
					r.exec = q
				}
			}
			exec, next = r.exec, r
			if exec == nil {
				exec, next = c.nextRound()
			}
		}
	}
	s.state, s.errs, s.err = left, nil, s.ctx.Err()
	c.mu.Unlock()
	if exec != nil {
		exec.wake <- next
	}
}

// send sends round r, on the goroutine of its call s; a call whose
// context has ended is taken out first. Then it sets each call's results,
// wakes its callers and hands the next round on.
func (c *conn) send(s *settleCall, r *round) {
	c.mu.Lock()
	live := make([]*settleCall, 0, len(r.calls))
	var done []*settleCall
	for _, q := range r.calls {
		switch {
		case q.state == left:
		case q.ctx.Err() != nil:
			q.state, q.err = settled, q.ctx.Err()
			done = append(done, q)
		default:
			q.state = sent
			live = append(live, q)
		}
	}
	c.mu.Unlock()
	wakeAll(s, done)

	var res []settleResult
	if len(live) > 0 {
		ctx, cancel := roundCtx(s, live)
		res = c.sendRound(ctx, live)
		cancel()
	}

	c.mu.Lock()
	done = done[:0]
	for i, q := range live {
		if q.state == sent {
			q.state, q.errs, q.err = settled, res[i].errs, res[i].err
			done = append(done, q)
		}
	}
	exec, next := c.nextRound()
	c.mu.Unlock()
	wakeAll(s, done)
	if exec != nil {
		exec.wake <- next
	}
}

// wakeAll tells the callers of calls, but s's own (it is running), that
// their results are set.
func wakeAll(s *settleCall, calls []*settleCall) {
	for _, q := range calls {
		if q != s {
			q.wake <- nil
		}
	}
}

// roundCtx is the context a round of the calls live runs on, sent by s's
// caller: s's own context when s is alone in it; otherwise s's values
// without its cancellation, ending at the latest deadline of live (s's,
// unless s has left), so that neither s's deadline nor its caller's
// cancellation cuts the others' answers short.
func roundCtx(s *settleCall, live []*settleCall) (context.Context, context.CancelFunc) {
	if len(live) == 1 && live[0] == s {
		return s.ctx, func() {}
	}
	last := live[0]
	for _, q := range live[1:] {
		if later(q.ctx, last.ctx) {
			last = q
		}
	}
	ctx := context.WithoutCancel(s.ctx)
	if dl, ok := last.ctx.Deadline(); ok {
		return context.WithDeadline(ctx, dl)
	}
	return ctx, func() {}
}

// later reports whether a's deadline is after b's; no deadline is the
// latest.
func later(a, b context.Context) bool {
	da, okA := a.Deadline()
	db, okB := b.Deadline()
	return !okA && okB || okA && okB && da.After(db)
}

// nextRound takes the next round off the queue: the calls queued, in
// order, up to maxRound claims (at least one call), sent by the one with
// the latest deadline. With none queued the Conn is idle again.
func (c *conn) nextRound() (*settleCall, *round) {
	if len(c.queue) == 0 {
		c.busy = false
		return nil, nil
	}
	k, n := 1, c.queue[0].n
	for k < len(c.queue) && n+c.queue[k].n <= maxRound {
		n += c.queue[k].n
		k++
	}
	r := &round{calls: make([]*settleCall, k)}
	copy(r.calls, c.queue)
	rest := copy(c.queue, c.queue[k:])
	clear(c.queue[rest:])
	c.queue = c.queue[:rest]
	for _, q := range r.calls {
		q.state, q.round = picked, r
		if r.exec == nil || later(q.ctx, r.exec.ctx) {
			r.exec = q
		}
	}
	return r.exec, r
}
