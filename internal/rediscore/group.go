package rediscore

import (
	"context"
	"slices"

	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/internal/scripts"
)

// Group commit: the Commits and Releases of a Conn (those of at most
// maxGrouped claims; a larger one is a batch already, and is sent at once
// on its own) go to the server in rounds, one round in flight at a time.
// A call that finds no round in flight sends its claims at once, alone,
// on its own context: an idle Conn adds no wait and no timer. Calls that
// arrive while a round is in flight queue; when it is back, the caller
// that sent it hands the next round — every call queued meanwhile, in
// order, up to maxRound claims — to one of them, which sends it: one
// settle script call per mode (commit, release), and on a cluster per
// tenant (one slot each), all in one pipeline. No goroutine is started:
// every round is sent by a caller whose claims are in it.
//
// The contract holds per call, as if each had sent its claims alone:
//
//   - Budget (T1): the caller that sends a round is the one of its calls
//     whose deadline is the latest, and the round runs on that deadline
//     (not on that caller's cancellation), so no call's answer is cut
//     short by another's budget. Every other call waits for the round or
//     its own context, whichever comes first: it returns at its own
//     deadline even when its round is still in flight. The one cost: a
//     caller cancelled while it sends a round for others returns when the
//     round is back (by its own deadline), not at once.
//   - Lost replies (T5): a round is sent once. A call whose context ends
//     before its round is sent is taken out of it, and its claims are
//     never sent; once sent, the call returns its context's error and the
//     round's answer for it is dropped. A round whose reply is lost fails
//     each call in it with the error its own call would have had: its
//     context's deadline, or the round's error.
//   - Fencing and results (C7, C8, C10): each claim keeps its own hook_id
//     and gets its own result; the claims of one call stay together in
//     its round's script calls, those of one tenant in the call's order
//     (so two settles of one key in a call run in its order), and a round
//     that reached no server for any claim of a call is that call's whole
//     failure (T2).
//   - Close (T4): the Store waits for its calls before it closes the
//     Conn, and a round in flight is one of them.

// maxRound bounds the claims of one round, so that one settle script call
// keeps the server (which runs scripts one at a time) for a bounded time.
const maxRound = 128

// maxGrouped is the most claims of a call that goes in a round. A larger
// call (a replay of the degraded mode's outbox, an application's own
// batch) shares little with the one-claim Commits of hooks and would keep
// them waiting for its round: it is sent at once, beside the rounds.
const maxGrouped = 16

// settleState is where a settle call is in its round; Conn.mu guards it.
type settleState uint8

const (
	queued  settleState = iota // waiting for a round
	picked                     // in a round not yet sent
	sent                       // in a round on the wire
	settled                    // its results are set
	left                       // its caller returned on its context's end
)

// settleCall is one Commit or Release: its claims' script arguments, built
// by its own caller, and its results.
type settleCall struct {
	ctx    context.Context
	commit bool
	n      int          // claims
	groups []claimGroup // its claims by tenant
	wake   chan *round  // cap 1: a round to send, or nil when its results are set
	state  settleState  // guarded by Conn.mu
	round  *round       // its round once picked; guarded by Conn.mu
	errs   []error      // per claim, or nil with err: the whole call's failure
	err    error
	place  []placeInCall // where each group went in its round's calls
}

// claimGroup is claims of one tenant of a settle call: their indices in
// the call (nil: all, in order) and their settle script arguments.
type claimGroup struct {
	tenant     string
	idx        []int
	keys, args []string
}

// placeInCall is a group's place in a round: its script call and the
// index of its first claim there.
type placeInCall struct{ call, off int }

// round is the settle calls sent together, and the one that sends them.
type round struct {
	calls []*settleCall
	exec  *settleCall
}

// settle runs a Commit (commit true) or Release of claims in a round.
func (c *Conn) settle(ctx context.Context, commit bool, claims []driver.Claim) ([]error, error) {
	if len(claims) == 0 { // the Store sends none; nothing to send
		return nil, nil
	}
	s := c.newSettleCall(ctx, commit, claims)
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

// newSettleCall builds the script arguments of claims, by tenant.
func (c *Conn) newSettleCall(ctx context.Context, commit bool, claims []driver.Claim) *settleCall {
	s := &settleCall{ctx: ctx, commit: commit, n: len(claims)}
	if oneTenant(claims) {
		g := claimGroup{tenant: claims[0].Tenant}
		g.keys, g.args = scripts.SettleCall(c.prefix, commit, claims)
		s.groups = []claimGroup{g}
		return s
	}
	for _, idx := range GroupByTenant(claims) {
		batch := make([]driver.Claim, len(idx))
		for j, i := range idx {
			batch[j] = claims[i]
		}
		g := claimGroup{tenant: batch[0].Tenant, idx: idx}
		g.keys, g.args = scripts.SettleCall(c.prefix, commit, batch)
		s.groups = append(s.groups, g)
	}
	return s
}

func oneTenant(claims []driver.Claim) bool {
	for i := 1; i < len(claims); i++ {
		if claims[i].Tenant != claims[0].Tenant {
			return false
		}
	}
	return true
}

// leave takes s, whose context has ended, out of its round: it is not
// sent when it was not yet, and the round's answer for it is dropped when
// it was. The round s was to send goes to another of its calls, or, when
// none is left, the next round starts.
func (c *Conn) leave(s *settleCall) {
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
func (c *Conn) send(s *settleCall, r *round) {
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
func (c *Conn) nextRound() (*settleCall, *round) {
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

// settleResult is one settle call's results.
type settleResult struct {
	errs []error
	err  error
}

// sendRound runs the settle script over the claims of calls: one script
// call per mode and, when the client says so, per tenant, all in one
// pipeline. A call none of whose script calls got a reply has that as
// its whole failure; otherwise each claim gets its script call's result.
func (c *Conn) sendRound(ctx context.Context, calls []*settleCall) []settleResult {
	split := c.cl.SplitByTenant()
	type slot struct {
		commit bool
		tenant string
	}
	type callSize struct{ groups, keys, args int }
	// Each group's script call, and each call's size.
	at := make(map[slot]int, 2)
	var size []callSize
	for _, s := range calls {
		s.place = s.place[:0]
		for _, g := range s.groups {
			k := slot{commit: s.commit}
			if split {
				k.tenant = g.tenant
			}
			i, ok := at[k]
			if !ok {
				i = len(size)
				at[k] = i
				size = append(size, callSize{args: 1}) // the mode
			}
			z := &size[i]
			s.place = append(s.place, placeInCall{call: i, off: z.keys})
			z.groups++
			z.keys += len(g.keys)
			z.args += len(g.args) - 1
		}
	}
	// A call of one group is that group's arguments; a call of several
	// has its own, the mode once.
	script := make([]*Call, len(size))
	for _, s := range calls {
		for j, g := range s.groups {
			i := s.place[j].call
			sc := script[i]
			switch {
			case size[i].groups == 1:
				script[i] = &Call{Keys: g.keys, Args: g.args}
				continue
			case sc == nil:
				sc = &Call{Keys: make([]string, 0, size[i].keys)}
				sc.Args = append(make([]string, 0, size[i].args), g.args[0])
				script[i] = sc
			}
			sc.Keys = append(sc.Keys, g.keys...)
			sc.Args = append(sc.Args, g.args[1:]...)
		}
	}
	c.runAll(ctx, scripts.Settle, script)

	// Each script call's claims' results, or its error.
	perClaim := make([][]error, len(script))
	callErr := make([]error, len(script))
	reached := false
	for i, sc := range script {
		if sc.Err != nil {
			reached = reached || c.cl.IsReply(sc.Err)
			callErr[i] = c.mark(sc.Err)
			continue
		}
		reached = true
		res, err := scripts.DecodeSettle(sc.Reply, len(sc.Keys))
		perClaim[i], callErr[i] = res, driver.ErrorReply(err)
	}
	if reached {
		c.answered()
	}

	out := make([]settleResult, len(calls))
	for n, s := range calls {
		ok := false
		for _, p := range s.place {
			e := script[p.call].Err
			ok = ok || e == nil || c.cl.IsReply(e)
		}
		if !ok {
			out[n].err = callErr[s.place[0].call]
			continue
		}
		errs := make([]error, s.n)
		for j, g := range s.groups {
			p := s.place[j]
			for q := range len(g.keys) {
				i := q
				if g.idx != nil {
					i = g.idx[q]
				}
				if err := callErr[p.call]; err != nil {
					errs[i] = err
				} else {
					errs[i] = perClaim[p.call][p.off+q]
				}
			}
		}
		out[n].errs = errs
	}
	return out
}
