package claim

import "github.com/fleetstore/fleetstore/driver"

// Op is how a hook settles its claim.
type Op uint8

const (
	// Commit: the hook's event is durable; the key stays claimed for TTL.
	Commit Op = iota + 1
	// Release: the hook failed to make it durable; the key is freed.
	Release
)

// String returns "commit" or "release", the op in error messages.
func (o Op) String() string {
	if o == Commit {
		return "commit"
	}
	return "release"
}

// Write is the change a settle makes to the stored claim.
type Write uint8

const (
	// Keep: write nothing.
	Keep Write = iota
	// Store: store the claim Committed for the settling hook, expiring at
	// Settlement.Expires.
	Store
	// Delete: delete the claim.
	Delete
)

// Settlement is what Settle decides about one claim.
type Settlement struct {
	Write Write
	// Expires is when the committed claim expires when Store: now + TTL,
	// µs.
	Expires int64
	// Err is the settle's result: nil, a *driver.ClaimLostError naming
	// the holder (C8) or driver.ErrAlreadyCommitted (C6). It is nil
	// whenever Write is not Keep.
	Err error
}

// Settle decides op by hookID on a claim held as held at now µs, for a
// committed claim lasting ttl µs (the settle table of CONTRACT §4,
// C5–C8).
func Settle(held State, now int64, op Op, hookID string, ttl int64) Settlement {
	live := held.Live(now)
	switch {
	case live && held.HookID != hookID:
		return Settlement{Err: &driver.ClaimLostError{Holder: held.HookID}}
	case op == Commit && live && held.Phase == Committed:
		return Settlement{}
	case op == Commit:
		return Settlement{Write: Store, Expires: now + ttl}
	case live && held.Phase == Committed:
		return Settlement{Err: driver.ErrAlreadyCommitted}
	case live:
		return Settlement{Write: Delete}
	default:
		return Settlement{}
	}
}
