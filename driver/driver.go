// Package driver defines the interface a fleetstore backend implements.
//
// Most users never import this package: they import the root package
// github.com/fleetstore/fleetstore and blank-import a driver. Driver authors
// implement [Driver] and [Conn], register the driver from an init function
// with fleetstore.Register, and prove it with the conformance suite
// (package github.com/fleetstore/fleetstore/conformance).
//
// # The contract
//
// CONTRACT.md §1.4 says what the Store guarantees a driver and what a
// driver guarantees back; §3–§7 are the clauses the conformance suite
// checks. In this package's terms:
//
//   - A Conn whose calls never block may implement [NonBlocking]: it gets
//     the caller's context, with no timer armed for the budget.
//   - [Peeker] is a Conn's optional read of buckets (G11). Peek gets what
//     Hit gets: valid charges of one tenant, a context with the budget.
//   - A driver marks only what it alone knows about an error: [ErrorReply]
//     for the server's own answer, a wrap of [ErrTimeout] or
//     [ErrUnavailable] where only the driver can tell (a client's pool
//     timeout), and [ErrClaimLost] or [ErrAlreadyCommitted] for settle
//     outcomes. The Store classifies the rest once, and errors.As on the
//     driver's own error type keeps working through its wrapping.
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
