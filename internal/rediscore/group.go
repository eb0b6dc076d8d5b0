package rediscore

import (
	"context"
	"slices"

	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/internal/scripts"
)

// Rounds (group commit): the Hits, Commits and Releases of a Conn (a
// settle of at most maxGrouped claims; a larger one is a batch already,
// and is sent at once on its own) go to the server in rounds, one round
// in flight at a time per lane: the server's, or on a cluster each
// tenant's (the slot of its hash tag). A call that finds no round in flight is sent at
// once, alone, on its own context: an idle Conn adds no wait and no
// timer. Calls that arrive while a round is in flight queue; when it is
// back, the caller that sent it hands the next round — every call queued
// meanwhile, in order, up to maxRound claims and Hits — to one of them,
// which sends it: one script call per slot (plan.go), all in one
// pipeline. No goroutine is started: every round is sent by a caller
// whose call is in it.
//
// The contract holds per call, as if each had been sent alone, in the
// order they queued:
//
//   - Decisions (G1–G4, C1–C10): a script call runs its calls one after
//     the other, at one now, each by its own script's code, so each sees
//     the writes of those before it and a denied Hit writes nothing.
//   - Budget (T1): the caller that sends a round is the one of its calls
//     whose deadline is the latest, and the round runs on that deadline
//     (not on that caller's cancellation), so no call's answer is cut
//     short by another's budget. Every other call waits for the round or
//     its own context, whichever comes first: it returns at its own
//     deadline even when its round is still in flight. The one cost: a
//     caller cancelled while it sends a round for others returns when the
//     round is back (by its own deadline), not at once.
//   - Lost replies (T5): a round is sent once. A call whose context ends
//     before its round is sent is taken out of it, and is never sent;
//     once sent, the call returns its context's error and the round's
//     answer for it is dropped. A round whose reply is lost fails each
//     call in it with the error its own call would have had: its
//     context's deadline, or the round's error.
//   - Fencing and results (C7, C8, C10): each claim keeps its own hook_id
//     and gets its own result; the claims of one call stay together in
//     its round's script calls, those of one tenant in the call's order
//     (so two settles of one key in a call run in its order), one call's
//     script error is its own, and a round that reached no server for any
//     claim of a call is that call's whole failure (T2).
//   - Close (T4): the Store waits for its calls before it closes the
//     Conn, and a round in flight is one of them.

// maxRound bounds the claims and Hits of one round, so that one script
// call keeps the server (which runs scripts one at a time) for a bounded
// time.
const maxRound = 128

// maxGrouped is the most claims of a settle that goes in a round. A
// larger call (a replay of the degraded mode's outbox, an application's
// own batch) shares little with the one-claim Commits of hooks and would
// keep them waiting for its round: it is sent at once, beside the rounds.
const maxGrouped = 16

// opKind is what a call in a round does.
type opKind uint8

const (
	opHit opKind = iota
	opCommit
	opRelease
)

// opState is where a call is in its round; Conn.mu guards it.
type opState uint8

const (
	queued  opState = iota // waiting for a round
	picked                 // in a round not yet sent
	sent                   // in a round on the wire
	settled                // its results are set
	left                   // its caller returned on its context's end
)

// op is one Hit, Commit or Release: its script arguments, built by its
// own caller, and its results.
type op struct {
	ctx     context.Context
	kind    opKind
	n       int          // its weight in a round: its claims, 1 for a Hit
	charges int          // a Hit's charges
	groups  []claimGroup // its claims by tenant; a Hit's call is one
	wake    chan *round  // cap 1: a round to send, or nil when its results are set
	lane    *lane        // the lane it joined; guarded by Conn.mu
	state   opState      // guarded by Conn.mu
	round   *round       // its round once picked; guarded by Conn.mu
	result               // set when settled
}

// result is an op's answer: a Hit's result, or a settle's error per
// claim, or nil with err: the whole call's failure.
type result struct {
	hit  driver.Result
	errs []error
	err  error
}

// claimGroup is claims of one tenant of a settle call, their indices in
// the call (nil: all, in order) and their settle script arguments; or a
// Hit's script arguments.
type claimGroup struct {
	tenant     string
	idx        []int
	keys, args []string
}

// lane is where the calls of one slot queue: the one lane of a single
// server (key ""), or on a cluster (the client splits by tenant) the lane
// of a tenant, the tenant of a call's first claim, so that a round in
// flight to one slot holds up no call to another. A lane lives while a
// round of it is in flight. Conn.mu guards it.
type lane struct {
	key   string
	busy  bool  // a round is in flight
	queue []*op // calls waiting for the next round
}

// round is the calls sent together, and the one that sends them.
type round struct {
	ops  []*op
	exec *op
}

// hit runs a Hit in a round.
func (c *Conn) hit(ctx context.Context, charges []driver.Charge, claim *driver.Claim) (driver.Result, error) {
	o := &op{ctx: ctx, kind: opHit, n: 1, charges: len(charges)}
	g := claimGroup{}
	if len(charges) > 0 {
		g.tenant = charges[0].Tenant
	} else {
		g.tenant = claim.Tenant
	}
	g.keys, g.args = scripts.HitCall(c.prefix, charges, claim)
	o.groups = []claimGroup{g}
	c.join(o)
	return o.hit, o.err
}

// settle runs a Commit (commit true) or Release of claims in a round.
func (c *Conn) settle(ctx context.Context, commit bool, claims []driver.Claim) ([]error, error) {
	if len(claims) == 0 { // the Store sends none; nothing to send
		return nil, nil
	}
	o := c.newSettle(ctx, commit, claims)
	if len(claims) > maxGrouped {
		res := c.sendRound(ctx, []*op{o})
		return res[0].errs, res[0].err
	}
	c.join(o)
	return o.errs, o.err
}

// join sends o at once when no round is in flight, else queues it for
// the next round; it returns when o's results are set or its context
// has ended.
func (c *Conn) join(o *op) {
	key := ""
	if c.cl.SplitByTenant() {
		key = o.groups[0].tenant
	}
	c.mu.Lock()
	l := c.lanes[key]
	if l == nil {
		if c.lanes == nil {
			c.lanes = make(map[string]*lane)
		}
		l = &lane{key: key}
		c.lanes[key] = l
	}
	o.lane = l
	if !l.busy {
		// Alone: no other caller sees o, so it needs no round of its own.
		l.busy = true
		c.mu.Unlock()
		var res result
		switch {
		case o.ctx.Err() != nil:
			res.err = o.ctx.Err()
		case len(o.groups) == 1:
			res = c.sendAlone(o.ctx, o)
		default:
			res = c.sendRound(o.ctx, []*op{o})[0]
		}
		c.mu.Lock()
		o.state, o.result = settled, res
		exec, next := c.nextRound(l)
		c.mu.Unlock()
		if exec != nil {
			exec.wake <- next
		}
		return
	}
	o.wake = make(chan *round, 1)
	l.queue = append(l.queue, o)
	c.mu.Unlock()
	select {
	case r := <-o.wake:
		if r != nil {
			c.send(o, r)
		}
	case <-o.ctx.Done():
		c.leave(o)
	}
}

// newSettle builds the script arguments of claims, by tenant.
func (c *Conn) newSettle(ctx context.Context, commit bool, claims []driver.Claim) *op {
	o := &op{ctx: ctx, kind: opRelease, n: len(claims)}
	if commit {
		o.kind = opCommit
	}
	if oneTenant(claims) {
		g := claimGroup{tenant: claims[0].Tenant}
		g.keys, g.args = scripts.SettleCall(c.prefix, commit, claims)
		o.groups = []claimGroup{g}
		return o
	}
	for _, idx := range GroupByTenant(claims) {
		batch := make([]driver.Claim, len(idx))
		for j, i := range idx {
			batch[j] = claims[i]
		}
		g := claimGroup{tenant: batch[0].Tenant, idx: idx}
		g.keys, g.args = scripts.SettleCall(c.prefix, commit, batch)
		o.groups = append(o.groups, g)
	}
	return o
}

func oneTenant(claims []driver.Claim) bool {
	for i := 1; i < len(claims); i++ {
		if claims[i].Tenant != claims[0].Tenant {
			return false
		}
	}
	return true
}

// leave takes o, whose context has ended, out of its round: it is not
// sent when it was not yet, and the round's answer for it is dropped when
// it was. The round o was to send goes to another of its calls, or, when
// none is left, the next round starts.
func (c *Conn) leave(o *op) {
	c.mu.Lock()
	var exec *op
	var next *round
	switch o.state {
	case settled: // the answer came first
		c.mu.Unlock()
		return
	case queued:
		for i, q := range o.lane.queue {
			if q == o {
				o.lane.queue = slices.Delete(o.lane.queue, i, i+1)
				break
			}
		}
	case picked:
		if r := o.round; r.exec == o {
			r.exec = nil
			for _, q := range r.ops {
				if q != o && q.state == picked && (r.exec == nil || later(q.ctx, r.exec.ctx)) {
					r.exec = q
				}
			}
			exec, next = r.exec, r
			if exec == nil {
				exec, next = c.nextRound(o.lane)
			}
		}
	}
	o.state, o.result = left, result{err: o.ctx.Err()}
	c.mu.Unlock()
	if exec != nil {
		exec.wake <- next
	}
}

// send sends round r, on the goroutine of its call o; a call whose
// context has ended is taken out first. Then it sets each call's results,
// wakes its callers and hands the next round on.
func (c *Conn) send(o *op, r *round) {
	c.mu.Lock()
	live := make([]*op, 0, len(r.ops))
	var done []*op
	for _, q := range r.ops {
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
	wakeAll(o, done)

	var res []result
	if len(live) > 0 {
		ctx, cancel := roundCtx(o, live)
		res = c.sendRound(ctx, live)
		cancel()
	}

	c.mu.Lock()
	done = done[:0]
	for i, q := range live {
		if q.state == sent {
			q.state, q.result = settled, res[i]
			done = append(done, q)
		}
	}
	exec, next := c.nextRound(o.lane)
	c.mu.Unlock()
	wakeAll(o, done)
	if exec != nil {
		exec.wake <- next
	}
}

// wakeAll tells the callers of ops, but o's own (it is running), that
// their results are set.
func wakeAll(o *op, ops []*op) {
	for _, q := range ops {
		if q != o {
			q.wake <- nil
		}
	}
}

// roundCtx is the context a round of the calls live runs on, sent by o's
// caller: o's own context when o is alone in it; otherwise o's values
// without its cancellation, ending at the latest deadline of live (o's,
// unless o has left), so that neither o's deadline nor its caller's
// cancellation cuts the others' answers short.
func roundCtx(o *op, live []*op) (context.Context, context.CancelFunc) {
	if len(live) == 1 && live[0] == o {
		return o.ctx, func() {}
	}
	last := live[0]
	for _, q := range live[1:] {
		if later(q.ctx, last.ctx) {
			last = q
		}
	}
	ctx := context.WithoutCancel(o.ctx)
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
// order, up to maxRound claims and Hits (at least one call), sent by the
// one with the latest deadline. With none queued the lane is idle again,
// and a tenant's lane is dropped.
func (c *Conn) nextRound(l *lane) (*op, *round) {
	if len(l.queue) == 0 {
		l.busy = false
		if l.key != "" {
			delete(c.lanes, l.key)
		}
		return nil, nil
	}
	k, n := 1, l.queue[0].n
	for k < len(l.queue) && n+l.queue[k].n <= maxRound {
		n += l.queue[k].n
		k++
	}
	r := &round{ops: make([]*op, k)}
	copy(r.ops, l.queue)
	rest := copy(l.queue, l.queue[k:])
	clear(l.queue[rest:])
	l.queue = l.queue[:rest]
	for _, q := range r.ops {
		q.state, q.round = picked, r
		if r.exec == nil || later(q.ctx, r.exec.ctx) {
			r.exec = q
		}
	}
	return r.exec, r
}
