package postgres

import (
	"context"

	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/internal/round"
)

// Group commit (internal/round, whose rules hold here): the Commits and
// Releases of a Conn of at most maxGrouped claims go to the server in
// rounds, one round in flight at a time, of at most maxRound claims. A
// round is one call of settle_v1 (sendRound). settle_v1 settles every
// claim in one transaction: a round that fails (no answer, a lock
// timeout) settled nothing, and is each of its calls' whole failure.

// maxRound bounds the claims of one round.
const maxRound = 128

// maxGrouped is the most claims of a call that goes in a round; a larger
// call is sent at once, beside the rounds.
const maxGrouped = 16

// settleCall is one Commit or Release: its claims.
type settleCall struct {
	commit bool
	claims []driver.Claim
	n      int
}

// newRounds returns c's group commit queue.
func (c *conn) newRounds() *round.Queue[*settleCall, settleResult] {
	return round.New(maxRound, c.sendRound, func(err error) settleResult {
		return settleResult{err: err}
	})
}

// settle runs a Commit (commit true) or Release of claims in a round.
func (c *conn) settle(ctx context.Context, commit bool, claims []driver.Claim) ([]error, error) {
	if len(claims) == 0 { // the Store sends none; nothing to send
		return nil, nil
	}
	s := &settleCall{commit: commit, claims: claims, n: len(claims)}
	var res settleResult
	if len(claims) > maxGrouped {
		res = c.sendRound(ctx, []*settleCall{s})[0]
	} else {
		res = c.rounds.Do(ctx, "", s.n, s)
	}
	return res.errs, res.err
}
