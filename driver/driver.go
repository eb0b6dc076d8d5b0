// Package driver defines the interface a fleetstore backend implements.
//
// Most users never import this package: they import the root package
// github.com/fleetstore/fleetstore and blank-import a driver. Driver authors
// implement [Driver] and [Conn], register the driver from an init function
// with fleetstore.Register, and prove it with the conformance suite
// (package github.com/fleetstore/fleetstore/conformance).
//
// # What the Store guarantees to a driver
//
//   - Input is valid: every rule of CONTRACT §6 has been checked (lengths,
//     kind syntax, increment ≥ 1µs and ≤ capacity, TTLs in range, one tenant
//     per Hit, no kind twice, at most MaxCharges charges). Increment and
//     Capacity are whole microseconds.
//   - Hit is never called with no charges and no claim.
//   - Every context carries a deadline: the earlier of the caller's and the
//     store's timeout (the per-call budget, CONTRACT T1). A driver whose
//     calls never block may implement [NonBlocking] to skip the timer.
//   - Peek, a Conn's optional read of buckets ([Peeker]), gets what Hit
//     gets: valid charges of one tenant, a context with the budget.
//   - No method is called after Close has been called, and Close is called
//     at most once.
//
// # What a driver guarantees back
//
//   - Open does no network I/O and never blocks (T3).
//   - One round trip per Hit where the backend allows it (a script), and the
//     GCRA of CONTRACT §3 in integer microseconds (package gcra is the
//     reference).
//   - A call whose reply was lost is never re-sent (T5): the script may have
//     run. Re-running a script on a reply that proves it did not run
//     (NOSCRIPT, a missing function) is the one exception.
//   - Every call returns by the context's deadline (T1), and nothing it
//     started outlives the deadline by more than the budget (T4).
//   - Errors are marked, not classified: the Store classifies every
//     error once (deadline or socket timeout: ErrTimeout; the caller's
//     cancellation as is; anything else: ErrUnavailable) and logs an
//     outage's start and end once per Store. A driver marks only what it
//     alone knows: [ErrorReply] for an error that was the server's own answer
//     (an error reply, a malformed reply: the store was reached), a wrap of
//     [ErrTimeout] or [ErrUnavailable] where only the driver can tell (a
//     client's pool timeout), and [ErrClaimLost] / [ErrAlreadyCommitted]
//     for settle outcomes. errors.As on the driver's own error type keeps
//     working through the Store's wrapping.
//   - A malformed reply from the server is an error value, never a panic (V4).
//   - Errors never contain a password or a URL with credentials.
package driver

import (
	"context"
	"net/url"
	"time"

	"go.uber.org/zap"
)

// Driver opens connections for one URL scheme. It is registered once, from
// an init function, with fleetstore.Register.
type Driver interface {
	// Open returns a Conn for cfg. It validates the driver's own URL
	// parameters (an unknown one is an error wrapping ErrInvalid that lists
	// the accepted ones) and does no network I/O.
	Open(cfg Config) (Conn, error)
}

// Config is what the Store hands to Driver.Open.
type Config struct {
	// URL is the parsed store URL. The common parameters (timeout,
	// key_prefix) have been removed from its query; whatever is left is the
	// driver's to accept or reject.
	URL *url.URL
	// KeyPrefix namespaces every key the driver writes. Default "fleetstore".
	KeyPrefix string
	// Timeout is the store's default per-call budget. Every call's context
	// already carries a deadline no later than now+Timeout; drivers use it to
	// size client-level dial/read/write timeouts.
	Timeout time.Duration
	// Logger is never nil (zap.NewNop() by default).
	Logger *zap.Logger
}

// Conn is one open store. Its methods are called concurrently.
type Conn interface {
	// Hit charges every bucket and takes the claim (nil: no claim) in one
	// atomic step, by the rules of CONTRACT §3 and §4 (G1–G10, C1–C4). It
	// reports each charge's ResetAfter in Result.Buckets, in order, and
	// sets Result.NBuckets to len(charges), whatever the outcome (G10).
	Hit(ctx context.Context, charges []Charge, claim *Claim) (Result, error)
	// Commit settles claims as committed (C5–C8). A failure of the whole
	// call (the store could not be reached, the deadline passed before
	// any claim was settled) is the second result, and the first is then
	// ignored. Otherwise it returns one result per claim, in order (nil:
	// settled), len(claims) of them; a per-claim failure such as a
	// deadline that passed in the middle of the batch goes in its slot.
	Commit(ctx context.Context, claims []Claim) ([]error, error)
	// Release deletes pending claims held by their hook (C5–C8), with
	// results as for Commit. Claims passed to it may have no TTLs.
	Release(ctx context.Context, claims []Claim) ([]error, error)
	// Reset forgets every bucket of tenant and nothing else (G5). Claims are
	// kept.
	Reset(ctx context.Context, tenant string) error
	// Ping checks that the store answers.
	Ping(ctx context.Context) error
	// Close releases every connection and goroutine the Conn holds (T4).
	Close() error
}

// Peeker is an optional interface for a Conn that reads buckets without
// charging them (CONTRACT G11); Store.Peek finds it by type assertion, as
// database/sql finds its optional interfaces, and returns an error
// matching errors.ErrUnsupported for a Conn without it. Every driver of
// this module implements it.
type Peeker interface {
	// Peek reports the buckets of charges (1 to MaxCharges charges of one
	// tenant, kinds distinct, valid as for Hit) as they stand at the
	// store's now, in one round trip, writing nothing: no bucket, no
	// expiry, no record of an absent bucket. It sets Result.NBuckets to
	// len(charges) and each Buckets[i].ResetAfter to max(tat − now, 0) in
	// whole µs (an absent bucket: 0), as Hit reports a bucket it did not
	// charge (G10); the Store derives every other field and ignores what
	// else the driver sets.
	Peek(ctx context.Context, charges []Charge) (Result, error)
}

// NonBlocking is an optional interface for a Conn whose calls never wait on
// I/O (the in-process memory driver). The Store then checks the context once
// before the call instead of arming a budget timer.
type NonBlocking interface {
	NonBlocking()
}

// ExpiryGranularity is an optional interface for a Driver whose records may
// outlive their expiry by more than 1ms (memcached, whose clock ticks in
// whole seconds: 2s). The conformance suite allows that much lingering in
// G7 and C9; a Driver that does not implement it is held to 1ms.
type ExpiryGranularity interface {
	ExpiryGranularity() time.Duration
}

// Record is one record a store keeps for a tenant, for the conformance
// suite's expiry checks (G7, C9): a key the driver chooses ("bucket",
// "claim/SOURCE/KEY", a server key) and its remaining time to live
// (negative: no expiry).
type Record struct {
	Key string
	TTL time.Duration
}
