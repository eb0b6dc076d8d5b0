package rediscore

import (
	"context"

	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/internal/round"
	"github.com/fleetstore/fleetstore/internal/scripts"
)

// Rounds (group commit, internal/round): the Hits, Commits and Releases
// of a Conn (a settle of at most maxGrouped claims; a larger one is a
// batch already, and is sent at once on its own) go to the server in
// rounds, one round in flight at a time per lane. A lane is the
// server's, or on a cluster each tenant's (the slot of its hash tag). A
// round is every call queued meanwhile, in order, up to maxRound claims
// and Hits. It is sent as one script call per slot (plan.go), all in one
// pipeline; a call alone in its round, of one tenant, is sent as the
// client sends a call alone (sendAlone). internal/round keeps each call's
// budget (T1) and sends no call whose context ended first (T5).
//
// The contract holds per call, as if each had been sent alone, in the
// order they queued:
//
//   - Decisions (G1–G4, C1–C10): a script call runs its calls one after
//     the other, at one now, each by its own script's code, so each sees
//     the writes of those before it and a denied Hit writes nothing.
//   - Lost replies (T5): a round whose reply is lost fails each call in
//     it with the error its own call would have had: its context's
//     deadline, or the round's error.
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

// op is one Hit, Commit or Release: its script arguments, built by its
// own caller.
type op struct {
	kind    opKind
	n       int          // its weight in a round: its claims, 1 for a Hit
	charges int          // a Hit's charges
	windows uint8        // which of them are window charges (scripts.Windows)
	groups  []claimGroup // its claims by tenant; a Hit's call is one
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

// hit runs a Hit in a round.
func (c *Conn) hit(ctx context.Context, charges []driver.Charge, claim *driver.Claim) (driver.Result, error) {
	o := &op{kind: opHit, n: 1, charges: len(charges), windows: scripts.Windows(charges)}
	g := claimGroup{}
	if len(charges) > 0 {
		g.tenant = charges[0].Tenant
	} else {
		g.tenant = claim.Tenant
	}
	g.keys, g.args = scripts.HitCall(c.prefix, charges, claim)
	o.groups = []claimGroup{g}
	res := c.join(ctx, o)
	return res.hit, res.err
}

// settle runs a Commit (commit true) or Release of claims in a round.
func (c *Conn) settle(ctx context.Context, commit bool, claims []driver.Claim) ([]error, error) {
	if len(claims) == 0 { // the Store sends none; nothing to send
		return nil, nil
	}
	o := c.newSettle(commit, claims)
	var res result
	if len(claims) > maxGrouped {
		res = c.sendRound(ctx, []*op{o})[0]
	} else {
		res = c.join(ctx, o)
	}
	return res.errs, res.err
}

// newRounds returns c's rounds.
func (c *Conn) newRounds() *round.Queue[*op, result] {
	return round.New(maxRound, c.sendQueued, func(err error) result { return result{err: err} })
}

// join runs o in a round of its lane: on a cluster its first claim's
// tenant's, else the one lane "".
func (c *Conn) join(ctx context.Context, o *op) result {
	key := ""
	if c.cl.SplitByTenant() {
		key = o.groups[0].tenant
	}
	return c.rounds.Do(ctx, key, o.n, o)
}

// newSettle builds the script arguments of claims, by tenant.
func (c *Conn) newSettle(commit bool, claims []driver.Claim) *op {
	o := &op{kind: opRelease, n: len(claims)}
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
