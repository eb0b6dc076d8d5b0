// Package claim is the two-phase dedupe claim of CONTRACT §4 as pure
// functions: integer microseconds in, decision out, no clock, no I/O. It is
// the reference the memory and memcached drivers decide by, as package gcra
// is for the charges; the Lua scripts of the Redis-like drivers
// (internal/scripts) follow the same tables.
//
// A claim, keyed by (tenant, source_id, key), is absent, pending for a hook
// (it expires PendingTTL after the hit that took it) or committed by a hook
// (it expires TTL after the commit). A State whose expiry has passed is
// absent, whatever is still stored.
//
// A Hit with a claim decides in this order, at one now:
//
//	d := claim.Hit(held, now, hookID)
//	1. d.Verdict == OwnRetry: OK; nothing charged or written (C2)
//	2. the charges, by gcra.Charge: a denial is RateLimited, nothing written (G3)
//	3. d.Verdict == InFlight or Duplicate: d.Result(), nothing written (C3, C4)
//	4. d.Verdict == Free: the charges are taken and the claim stored
//	   Pending for hookID, expiring at now + PendingTTL (C1)
//
// Commit and Release settle a claim, matched on hook_id as well as on its
// key (C5–C8); Settle returns the write and the result of:
//
//	held                  Commit                        Release
//	pending, same hook    Store committed, now + TTL    Delete
//	committed, same hook  Keep, nil                     Keep, ErrAlreadyCommitted
//	absent or expired     Store committed, now + TTL    Keep, nil
//	another hook's        Keep, ClaimLostError          Keep, ClaimLostError
package claim

// Phase is where a claim stands in its two phases.
type Phase uint8

const (
	// Absent: no claim is stored for the key.
	Absent Phase = iota
	// Pending: a hit took the claim; its hook has not settled it yet.
	Pending
	// Committed: the hook's event is durable; the key is a duplicate.
	Committed
)

// State is a claim as a store holds it. The zero value is absent.
type State struct {
	Phase Phase
	// HookID is the holder: the hook that took (Pending) or committed
	// (Committed) the claim. Settle compares it, the claim's fencing token.
	HookID string
	// Node is where the claim was taken or committed: informational,
	// never decided on.
	Node string
	// Expires is when the claim frees the key, µs: it is absent from
	// Expires on.
	Expires int64
}

// Live reports whether s holds its key at now µs: pending or committed,
// and not yet expired.
func (s State) Live(now int64) bool {
	return s.Phase != Absent && s.Expires > now
}
