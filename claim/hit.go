package claim

import (
	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/gcra"
)

// Verdict is what the held claim means for a Hit (the Hit table of
// CONTRACT §4).
type Verdict uint8

const (
	// Free: absent or expired. The Hit takes the claim, pending for its
	// hook, together with its charges (C1).
	Free Verdict = iota
	// OwnRetry: pending for the same hook, a retry of a hit whose reply
	// was lost. The Hit is OK before the charges are looked at, and
	// charges and writes nothing: it was charged once already (C2).
	OwnRetry
	// InFlight: pending for another hook. The Hit is Pending for the
	// claim's remaining time and writes nothing (C3).
	InFlight
	// Duplicate: committed, by any hook. The Hit is Duplicate naming the
	// committer and writes nothing (C4).
	Duplicate
)

// Decision is what Hit decides about one claim.
type Decision struct {
	Verdict Verdict
	// HookID is the committer when Duplicate.
	HookID string
	// Wait is the claim's remaining pending time when InFlight, µs (≥ 1).
	Wait int64
}

// Hit decides a Hit by hookID on a claim held as held at now µs. The
// caller answers OwnRetry before its charges and the other verdicts after
// them (the order in the package doc).
func Hit(held State, now int64, hookID string) Decision {
	switch {
	case !held.Live(now):
		return Decision{Verdict: Free}
	case held.Phase == Committed:
		return Decision{Verdict: Duplicate, HookID: held.HookID}
	case held.HookID == hookID:
		return Decision{Verdict: OwnRetry}
	default:
		return Decision{Verdict: InFlight, Wait: held.Expires - now}
	}
}

// Result is the Hit's answer for d: OK for OwnRetry and for Free (once the
// charges and the claim are written), Duplicate with the committer's
// hook_id, Pending with the retry-after of the remaining time
// (gcra.RetryAfter: whole ms rounded up, ≥ 1ms).
func (d Decision) Result() driver.Result {
	switch d.Verdict {
	case Duplicate:
		return driver.Result{Outcome: driver.Duplicate, HookID: d.HookID}
	case InFlight:
		return driver.Result{Outcome: driver.Pending, RetryAfter: gcra.RetryAfter(d.Wait)}
	default:
		return driver.Result{Outcome: driver.OK}
	}
}

// Answer sets r's outcome, hook_id and retry-after to d.Result()'s,
// leaving the rest of r (its bucket states, G10) as it is.
func (d Decision) Answer(r *driver.Result) {
	a := d.Result()
	r.Outcome, r.HookID, r.RetryAfter = a.Outcome, a.HookID, a.RetryAfter
}
