// Package round is group commit: the calls of a Conn go to the server in
// rounds, one round in flight at a time per lane. A call that finds its
// lane idle is sent at once, alone, on its own context: an idle lane adds
// no wait, no timer and no goroutine. Calls that arrive while a round is
// in flight queue. When the round is back, the caller that sent it hands
// the next round to one of the calls queued meanwhile, which sends it.
// The next round is every call queued, in order, up to a bound on its
// weight. No goroutine is started: every round is sent by a caller whose
// call is in it.
//
// The rules hold per call, as if each had been sent alone:
//
//   - Budget (CONTRACT T1): the caller that sends a round is the one of
//     its calls whose deadline is the latest. The round runs on that
//     deadline, not on that caller's cancellation, so no call's answer is
//     cut short by another's budget. Every other call waits for the round
//     or its own context, whichever comes first: it returns at its own
//     deadline even when its round is still in flight. A caller cancelled
//     while it sends a round for others returns when the round is back,
//     with its context's error.
//   - Lost replies (CONTRACT T5): a round is sent once. A call whose
//     context ends before its round is sent is taken out of it and never
//     sent. Once sent, the call returns its context's error and the
//     round's answer for it is dropped.
//
// How a round is built, sent and decoded is the user's: a Send function.
package round

import (
	"context"
	"slices"
	"sync"
)

// Send sends calls, a round, on ctx and returns one result per call, in
// order. It is called with one call alone too, on that call's context.
type Send[T, R any] func(ctx context.Context, calls []T) []R

// Queue runs calls of type T, with results of type R, in rounds. Its
// lanes are named by the user; the lane "" lives as long as the Queue,
// any other while a round of it is in flight. Make one with New.
type Queue[T, R any] struct {
	max  int
	send Send[T, R]
	fail func(error) R

	mu    sync.Mutex
	lanes map[string]*lane[T, R]
}

// New returns a Queue whose rounds weigh at most max (a call heavier than
// max goes in a round alone). send sends a round; fail is the result of a
// call that was not sent, or whose answer is dropped, because its
// context ended with err.
func New[T, R any](max int, send Send[T, R], fail func(err error) R) *Queue[T, R] {
	return &Queue[T, R]{max: max, send: send, fail: fail}
}

// state is where a call is in its round; Queue.mu guards it.
type state uint8

const (
	queued  state = iota // waiting for a round
	picked               // in a round not yet sent
	sent                 // in a round on the wire
	settled              // its result is set
	left                 // its caller returned on its context's end
)

// call is one caller's call and its result.
type call[T, R any] struct {
	ctx   context.Context
	n     int               // its weight in a round
	v     T                 // what the user sends
	wake  chan *round[T, R] // cap 1: a round to send, or nil when its result is set
	lane  *lane[T, R]
	state state        // guarded by Queue.mu
	round *round[T, R] // its round once picked; guarded by Queue.mu
	res   R            // set when settled
}

// lane is where the calls of one lane queue. Queue.mu guards it.
type lane[T, R any] struct {
	key   string
	busy  bool          // a round is in flight
	queue []*call[T, R] // calls waiting for the next round
}

// round is the calls sent together, and the one that sends them.
type round[T, R any] struct {
	calls []*call[T, R]
	exec  *call[T, R]
}

// Do runs v, of weight n, in a round of the lane key and returns its
// result: Send's for it, or fail's when ctx ends first. It sends v at
// once when no round of the lane is in flight, else queues it for the
// next round; it returns when v's result is set or ctx has ended.
func (q *Queue[T, R]) Do(ctx context.Context, key string, n int, v T) R {
	c := &call[T, R]{ctx: ctx, n: n, v: v}
	q.mu.Lock()
	l := q.lanes[key]
	if l == nil {
		if q.lanes == nil {
			q.lanes = make(map[string]*lane[T, R])
		}
		l = &lane[T, R]{key: key}
		q.lanes[key] = l
	}
	c.lane = l
	if !l.busy {
		// Alone: no other caller sees c, so it needs no round of its own.
		l.busy = true
		q.mu.Unlock()
		var res R
		if err := ctx.Err(); err != nil {
			res = q.fail(err)
		} else {
			res = q.send(ctx, []T{v})[0]
		}
		q.mu.Lock()
		c.state, c.res = settled, res
		exec, next := q.nextRound(l)
		q.mu.Unlock()
		if exec != nil {
			exec.wake <- next
		}
		return res
	}
	c.wake = make(chan *round[T, R], 1)
	l.queue = append(l.queue, c)
	q.mu.Unlock()
	select {
	case r := <-c.wake:
		if r != nil {
			q.sendRound(c, r)
		}
	case <-ctx.Done():
		q.leave(c)
	}
	return c.res
}

// leave takes c, whose context has ended, out of its round: it is not
// sent when it was not yet, and the round's answer for it is dropped when
// it was. The round c was to send goes to another of its calls, or, when
// none is left, the next round starts.
func (q *Queue[T, R]) leave(c *call[T, R]) {
	q.mu.Lock()
	var exec *call[T, R]
	var next *round[T, R]
	switch c.state {
	case settled: // the answer came first
		q.mu.Unlock()
		return
	case queued:
		for i, o := range c.lane.queue {
			if o == c {
				c.lane.queue = slices.Delete(c.lane.queue, i, i+1)
				break
			}
		}
	case picked:
		if r := c.round; r.exec == c {
			r.exec = nil
			for _, o := range r.calls {
				if o != c && o.state == picked && (r.exec == nil || later(o.ctx, r.exec.ctx)) {
					r.exec = o
				}
			}
			exec, next = r.exec, r
			if exec == nil {
				exec, next = q.nextRound(c.lane)
			}
		}
	}
	c.state, c.res = left, q.fail(c.ctx.Err())
	q.mu.Unlock()
	if exec != nil {
		exec.wake <- next
	}
}

// sendRound sends round r, on the goroutine of its call c; a call whose
// context has ended is taken out first. Then it sets each call's result,
// wakes its callers and hands the next round on.
func (q *Queue[T, R]) sendRound(c *call[T, R], r *round[T, R]) {
	q.mu.Lock()
	live := make([]*call[T, R], 0, len(r.calls))
	var done []*call[T, R]
	for _, o := range r.calls {
		switch {
		case o.state == left:
		case o.ctx.Err() != nil:
			o.state, o.res = settled, q.fail(o.ctx.Err())
			done = append(done, o)
		default:
			o.state = sent
			live = append(live, o)
		}
	}
	q.mu.Unlock()
	wakeAll(c, done)

	var res []R
	if len(live) > 0 {
		vs := make([]T, len(live))
		for i, o := range live {
			vs[i] = o.v
		}
		ctx, cancel := roundCtx(c, live)
		res = q.send(ctx, vs)
		cancel()
	}

	q.mu.Lock()
	done = done[:0]
	for i, o := range live {
		if o.state == sent {
			o.state, o.res = settled, res[i]
			done = append(done, o)
		}
	}
	if err := c.ctx.Err(); err != nil && c.state == settled {
		// c's caller ended while it sent the round for the others: its
		// answer is dropped, as any other call's that left in flight.
		c.res = q.fail(err)
	}
	exec, next := q.nextRound(c.lane)
	q.mu.Unlock()
	wakeAll(c, done)
	if exec != nil {
		exec.wake <- next
	}
}

// wakeAll tells the callers of calls, but c's own (it is running), that
// their results are set.
func wakeAll[T, R any](c *call[T, R], calls []*call[T, R]) {
	for _, o := range calls {
		if o != c {
			o.wake <- nil
		}
	}
}

// roundCtx is the context a round of the calls live runs on, sent by c's
// caller: c's own context when c is alone in it; otherwise c's values
// without its cancellation, ending at the latest deadline of live (c's,
// unless c has left), so that neither c's deadline nor its caller's
// cancellation cuts the others' answers short.
func roundCtx[T, R any](c *call[T, R], live []*call[T, R]) (context.Context, context.CancelFunc) {
	if len(live) == 1 && live[0] == c {
		return c.ctx, func() {}
	}
	last := live[0]
	for _, o := range live[1:] {
		if later(o.ctx, last.ctx) {
			last = o
		}
	}
	ctx := context.WithoutCancel(c.ctx)
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

// nextRound takes l's next round off its queue: the calls queued, in
// order, up to max in weight (at least one call), sent by the one with
// the latest deadline. With none queued the lane is idle again, and a
// lane but "" is dropped.
func (q *Queue[T, R]) nextRound(l *lane[T, R]) (*call[T, R], *round[T, R]) {
	if len(l.queue) == 0 {
		l.busy = false
		if l.key != "" {
			delete(q.lanes, l.key)
		}
		return nil, nil
	}
	k, n := 1, l.queue[0].n
	for k < len(l.queue) && n+l.queue[k].n <= q.max {
		n += l.queue[k].n
		k++
	}
	r := &round[T, R]{calls: make([]*call[T, R], k)}
	copy(r.calls, l.queue)
	rest := copy(l.queue, l.queue[k:])
	clear(l.queue[rest:])
	l.queue = l.queue[:rest]
	for _, o := range r.calls {
		o.state, o.round = picked, r
		if r.exec == nil || later(o.ctx, r.exec.ctx) {
			r.exec = o
		}
	}
	return r.exec, r
}
