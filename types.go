package fleetstore

import "github.com/fleetstore/fleetstore/driver"

// The value types of CONTRACT §1, defined in package driver so that drivers
// never import this package: their fields are documented there
// (go doc github.com/fleetstore/fleetstore/driver.Claim, …).
type (
	// Kind names a bucket of a tenant: [a-z][a-z0-9_]{0,31}.
	Kind = driver.Kind
	// Charge is one GCRA bucket to charge: Increment and Capacity in whole
	// microseconds (CONTRACT §3); or, with Window set, units of a calendar
	// quota (§3.2).
	Charge = driver.Charge
	// Claim is a two-phase dedupe claim on a provider event key (CONTRACT
	// §4): Tenant, SourceID, Key, HookID, Node, and TTL and PendingTTL
	// (whole µs).
	Claim = driver.Claim
	// Outcome is the decision of a Hit: OK, Duplicate, Pending, RateLimited.
	Outcome = driver.Outcome
	// Result is the answer to a Hit: Outcome, RetryAfter (whole ms),
	// HookID (the committer of a Duplicate), Local (decided by the
	// fallback), and the state of every charged bucket after it
	// (Result.Quota, G10). A quota's state is its window's count, Bucket.Used
	// (CONTRACT Q6).
	Result = driver.Result
	// Bucket is the state of one charged bucket after a Hit (G10):
	// ResetAfter and Headroom in whole µs, and whether it denied the Hit;
	// for a quota, Used, the units counted in its window (§3.2).
	Bucket = driver.Bucket
	// ClaimLostError is the error of a settle on a claim held by another
	// hook (C8): Holder names it. It matches ErrClaimLost.
	ClaimLostError = driver.ClaimLostError
	// InvalidError is a bad argument (V1): Field names it ("claims[1].key",
	// "url: timeout"), Reason says why. It matches ErrInvalid.
	InvalidError = driver.InvalidError
	// ClaimError is the error of one failed claim of a batch Commit or
	// Release (C10): Index, Tenant, SourceID and Key name the claim, Err
	// is its own error. A batch's failures are joined, one *ClaimError
	// each; a failure of the whole call is one error, not a ClaimError.
	ClaimError = driver.ClaimError
)

// MaxCharges is the most charges one Hit takes (CONTRACT §6).
const MaxCharges = driver.MaxCharges

// Bucket kinds.
const (
	Hooks = driver.Hooks
	Bytes = driver.Bytes
)

// Outcomes of a Hit.
const (
	OK          = driver.OK
	Duplicate   = driver.Duplicate
	Pending     = driver.Pending
	RateLimited = driver.RateLimited
)

// Sentinel errors, matched with errors.Is (CONTRACT §1).
var (
	// ErrInvalid: a bad argument or URL; the message names the field (V1).
	ErrInvalid = driver.ErrInvalid
	// ErrOverCapacity: a charge's increment exceeds its capacity: it can
	// never conform (G6).
	ErrOverCapacity = driver.ErrOverCapacity
	// ErrTimeout: the budget ran out (T1); also matches
	// context.DeadlineExceeded.
	ErrTimeout = driver.ErrTimeout
	// ErrUnavailable: the store cannot be reached or refused the call (T2).
	ErrUnavailable = driver.ErrUnavailable
	// ErrClosed: the Store was closed (T6).
	ErrClosed = driver.ErrClosed
	// ErrClaimLost: the claim is held by another hook; the error names the
	// holder (C8).
	ErrClaimLost = driver.ErrClaimLost
	// ErrAlreadyCommitted: Release of a committed claim (C6).
	ErrAlreadyCommitted = driver.ErrAlreadyCommitted
	// ErrUnknownScheme: Open was given a scheme no driver registered.
	ErrUnknownScheme = driver.ErrUnknownScheme
)
