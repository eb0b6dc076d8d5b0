package rediscore

import (
	"context"

	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/internal/scripts"
)

// A round's script calls: one per slot (per tenant when the client splits
// by tenant, one in all on a single server), holding the groups of its
// calls in the round's order. A script call of one group is that call's
// own script (hit or settle); of the groups of one settle call, one
// settle call of all their claims; otherwise a Round call, which runs
// each group by its own script's code, in order, at one now, each with
// its own script error (round.lua): a settle script call of several
// calls' claims would end at one claim's error, for every call in it.

// part is one group of one call of a round, in a script call: the call's
// index in the round and the group's in the call.
type part struct{ op, group int }

// scriptCall is one script call of a round and the parts it holds, in
// order.
type scriptCall struct {
	Call
	parts []part
}

// partResult is one part's answer: a Hit's result, or each claim's error
// of a settle's group, or err, the part's failure.
type partResult struct {
	hit  driver.Result
	errs []error
	err  error
}

// sendQueued sends ops, a round of a lane: a call alone in it, of one
// tenant, by sendAlone; otherwise by sendRound.
func (c *Conn) sendQueued(ctx context.Context, ops []*op) []result {
	if len(ops) == 1 && len(ops[0].groups) == 1 {
		return []result{c.sendAlone(ctx, ops[0])}
	}
	return c.sendRound(ctx, ops)
}

// sendRound runs the calls ops, a round, in one pipeline, and returns each
// call's result: a call none of whose script calls got a reply has that
// as its whole failure; otherwise each Hit and claim gets its own.
func (c *Conn) sendRound(ctx context.Context, ops []*op) []result {
	plan := c.plan(ops)
	calls := make([]*Call, len(plan))
	for i, sc := range plan {
		calls[i] = &sc.Call
	}
	c.runAll(ctx, calls)
	parts := make([][]partResult, len(plan))
	reached := false
	for i, sc := range plan {
		parts[i] = c.decode(ops, sc)
		reached = reached || sc.Err == nil || c.cl.IsReply(sc.Err)
	}
	if reached {
		c.answered()
	}
	return c.results(ops, plan, parts)
}

// sendAlone sends o, alone in its round and of one tenant, as the client
// sends a call alone: its pipelining of concurrent calls included (on a
// cluster, those of other tenants' lanes). A settle larger than a round
// takes is not sent so (it is in no lane): it is written at once
// (EvalMulti), never behind a batch in flight.
func (c *Conn) sendAlone(ctx context.Context, o *op) result {
	g := &o.groups[0]
	call := Call{Script: scripts.Settle, Keys: g.keys, Args: g.args}
	if o.kind == opHit {
		call.Script = scripts.Hit
	}
	c.runOne(ctx, &call)
	var p partResult
	if call.Err != nil {
		p.err = c.mark(call.Err)
		if o.kind == opHit || !c.cl.IsReply(call.Err) {
			return result{err: p.err} // a settle that reached no server: its whole failure
		}
	} else {
		c.answered()
		p = decodePart(o, 0, call.Reply)
	}
	if o.kind == opHit {
		return result{hit: p.hit, err: p.err}
	}
	if p.err != nil {
		p.errs = make([]error, o.n)
		for i := range p.errs {
			p.errs[i] = p.err
		}
	}
	return result{errs: p.errs}
}

// plan groups the parts of ops by slot into script calls and builds each.
func (c *Conn) plan(ops []*op) []*scriptCall {
	split := c.cl.SplitByTenant()
	at := make(map[string]int, 1)
	var plan []*scriptCall
	for i, o := range ops {
		for j, g := range o.groups {
			slot := ""
			if split {
				slot = g.tenant
			}
			k, ok := at[slot]
			if !ok {
				k = len(plan)
				at[slot] = k
				plan = append(plan, &scriptCall{})
			}
			plan[k].parts = append(plan[k].parts, part{op: i, group: j})
		}
	}
	for _, sc := range plan {
		sc.build(ops)
	}
	return plan
}

// build sets sc's script, keys and arguments from its parts.
func (sc *scriptCall) build(ops []*op) {
	first := ops[sc.parts[0].op]
	if len(sc.parts) == 1 {
		g := &first.groups[sc.parts[0].group]
		sc.Script, sc.Keys, sc.Args = scripts.Settle, g.keys, g.args
		if first.kind == opHit {
			sc.Script = scripts.Hit
		}
		return
	}
	oneCall, nk, na := first.kind != opHit, 0, 1
	ops1 := make([]scripts.RoundOp, len(sc.parts))
	for i, p := range sc.parts {
		o, g := ops[p.op], &ops[p.op].groups[p.group]
		oneCall = oneCall && p.op == sc.parts[0].op
		nk, na = nk+len(g.keys), na+len(g.args)-1
		ops1[i] = scripts.RoundOp{Settle: o.kind != opHit, Keys: g.keys, Args: g.args}
	}
	if !oneCall {
		sc.Script = scripts.Round
		sc.Keys, sc.Args = scripts.RoundCall(ops1)
		return
	}
	// The groups of one settle call: its claims in one settle call, the
	// mode once.
	sc.Script = scripts.Settle
	sc.Keys = make([]string, 0, nk)
	sc.Args = append(make([]string, 0, na), ops1[0].Args[0])
	for _, r := range ops1 {
		sc.Keys = append(sc.Keys, r.Keys...)
		sc.Args = append(sc.Args, r.Args[1:]...)
	}
}

// decode turns sc's reply (or error) into each of its parts' answers.
func (c *Conn) decode(ops []*op, sc *scriptCall) []partResult {
	out := make([]partResult, len(sc.parts))
	if sc.Err != nil {
		err := c.mark(sc.Err)
		for i := range out {
			out[i].err = err
		}
		return out
	}
	switch sc.Script {
	case scripts.Round:
		replies, err := scripts.DecodeRound(sc.Reply, len(sc.parts))
		for i, p := range sc.parts {
			if err != nil {
				out[i].err = driver.ErrorReply(err)
				continue
			}
			out[i] = decodePart(ops[p.op], p.group, replies[i])
		}
	case scripts.Hit:
		out[0] = decodePart(ops[sc.parts[0].op], 0, sc.Reply)
	default: // settle: each part's claims in order
		errs, err := scripts.DecodeSettle(sc.Reply, len(sc.Keys))
		off := 0
		for i, p := range sc.parts {
			n := len(ops[p.op].groups[p.group].keys)
			if err != nil {
				out[i].err = driver.ErrorReply(err)
			} else {
				out[i].errs = errs[off : off+n]
			}
			off += n
		}
	}
	return out
}

// decodePart decodes the reply to group g of o, alone or in a Round.
func decodePart(o *op, g int, reply any) partResult {
	if err, ok := reply.(*scripts.ScriptError); ok {
		return partResult{err: driver.ErrorReply(err)}
	}
	if o.kind == opHit {
		res, err := scripts.DecodeHit(reply, o.charges, o.windows)
		return partResult{hit: res, err: driver.ErrorReply(err)}
	}
	errs, err := scripts.DecodeSettle(reply, len(o.groups[g].keys))
	return partResult{errs: errs, err: driver.ErrorReply(err)}
}

// results gathers each call's result from its parts' answers: a Hit's
// from its one part; a settle's per claim, at the claim's index in the
// call, unless none of its script calls reached a server (T2): then its
// first group's error is the whole call's failure.
func (c *Conn) results(ops []*op, plan []*scriptCall, parts [][]partResult) []result {
	out := make([]result, len(ops))
	reached := make([]bool, len(ops))
	for k, sc := range plan {
		ok := sc.Err == nil || c.cl.IsReply(sc.Err)
		for i, p := range sc.parts {
			o, r, res := ops[p.op], &parts[k][i], &out[p.op]
			reached[p.op] = reached[p.op] || ok
			if o.kind == opHit {
				res.hit, res.err = r.hit, r.err
				continue
			}
			if p.group == 0 {
				res.err = r.err // the whole failure, unless reached
			}
			if res.errs == nil {
				res.errs = make([]error, o.n)
			}
			g := &o.groups[p.group]
			for q := range g.keys {
				at := q
				if g.idx != nil {
					at = g.idx[q]
				}
				if r.err != nil {
					res.errs[at] = r.err
				} else {
					res.errs[at] = r.errs[q]
				}
			}
		}
	}
	for i, o := range ops {
		switch {
		case o.kind == opHit:
		case reached[i]:
			out[i].err = nil
		default:
			out[i].errs = nil
		}
	}
	return out
}
