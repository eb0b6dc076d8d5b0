package driver

import (
	"fmt"
	"time"
)

// Kind names a bucket of a tenant. It matches [a-z][a-z0-9_]{0,31}.
type Kind string

// The bucket kinds a webhook edge charges.
const (
	Hooks Kind = "hooks" // one unit per hook
	Bytes Kind = "bytes" // one unit per body byte
)

// Charge is one GCRA bucket to charge (CONTRACT §3).
type Charge struct {
	Kind   Kind
	Tenant string
	// Increment is the emission interval times the cost of this charge:
	// ≥ 1µs, whole microseconds (finer parts are truncated).
	Increment time.Duration
	// Capacity is the burst capacity: increment × burst for one-unit
	// charges. A charge conforms when the bucket's TAT after it is no more
	// than Capacity ahead of now.
	Capacity time.Duration
	// Shadow marks the charge of a shadow limit (fleetstore.Limit.Shadow):
	// charged when the Hit's other charges are, never denying. The Store
	// never hands a driver a shadow charge: it sends it with Shadow unset
	// and Capacity the largest (366 days), and reads the bucket against
	// Capacity itself (CONTRACT §1.2).
	Shadow bool
	// Window, when its Max is set, makes this the charge of a calendar
	// quota (CONTRACT §3.2, Q1–Q6): Window.Cost units counted against
	// Window.Max in a fixed window, not a GCRA bucket. Increment and
	// Capacity are then zero. The Store never hands a driver a shadow
	// window charge: it sends Max as MaxWindowUnits and reads the count
	// against the quota's own Max itself.
	Window Window
}

// Window is a calendar quota's charge (CONTRACT §3.2): Cost units counted
// in a window that admits Max. The Store works out the calendar; the
// driver sees only the edges of three consecutive windows, in µs since
// the Unix epoch, strictly ascending: [Edges[0], Edges[1]) the window
// before the one that holds the node's now, [Edges[1], Edges[2]) that
// one, [Edges[2], Edges[3]) the next. The driver counts in the window that
// holds the store's now (G8), so that every node of a fleet counts in one
// window whatever its own clock says; when none does (the node's clock is
// off by more than a window), it decides nothing and returns an error
// marked ErrorReply.
type Window struct {
	// Max is how many units a window admits: 1 ≤ Max ≤ MaxWindowUnits.
	// Zero: the charge is a GCRA charge.
	Max int64
	// Cost is how many units this charge counts: 1 ≤ Cost ≤ Max (a Cost
	// over Max never conforms: ErrOverCapacity, G6).
	Cost int64
	// Edges bound the three windows (µs since the Unix epoch).
	Edges [4]int64
}

// MaxWindowUnits is the largest Window.Max and Cost: 2^50 units, so that
// a count stays an exact integer in every store's arithmetic (a Lua
// number is a double).
const MaxWindowUnits = 1 << 50

// IsWindow reports whether c is a calendar quota's charge.
func (c *Charge) IsWindow() bool { return c.Window.Max != 0 }

// Claim is a two-phase dedupe claim on a provider event key (CONTRACT §4).
type Claim struct {
	// Tenant, SourceID and Key identify the claim: the dedupe scope and the
	// provider's event id. 1–1024 bytes each, any bytes.
	Tenant, SourceID, Key string
	// HookID is the hook that claims the key (the fencing token of the
	// claim): 1–256 bytes.
	HookID string
	// Node is where the hook is being stored (informational): ≤ 256 bytes.
	Node string
	// TTL is how long a committed claim lasts, from the commit: 1ms–366
	// days. Hit and Commit need it; Release does not (zero is fine there).
	TTL time.Duration
	// PendingTTL is how long an unsettled claim lasts, from the hit:
	// 1ms–366 days. Hit needs it; Commit and Release do not.
	PendingTTL time.Duration
}

// The limits of a Claim's fields (CONTRACT §6), which the Store checks
// before a driver sees a claim.
const (
	MaxPartLen   = 1024                 // Tenant, SourceID, Key: bytes
	MaxHookIDLen = 256                  // HookID: bytes
	MaxNodeLen   = 256                  // Node: bytes
	MinTTL       = time.Millisecond     // TTL, PendingTTL
	MaxTTL       = 366 * 24 * time.Hour // TTL, PendingTTL
)

// Outcome is the decision of a Hit. The zero value is not a valid outcome.
type Outcome int

// The outcomes of a Hit (CONTRACT §4, C1–C4).
const (
	// OK: every charge was taken and the claim, if any, is now pending for
	// this hook.
	OK Outcome = iota + 1
	// Duplicate: the key is committed; Result.HookID names the committer.
	Duplicate
	// Pending: another hook holds the key pending; retry after
	// Result.RetryAfter.
	Pending
	// RateLimited: a charge does not conform; retry after Result.RetryAfter.
	RateLimited
)

// String returns the outcome's name: "ok", "duplicate", "pending",
// "rate_limited".
func (o Outcome) String() string {
	switch o {
	case OK:
		return "ok"
	case Duplicate:
		return "duplicate"
	case Pending:
		return "pending"
	case RateLimited:
		return "rate_limited"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// MaxCharges is the most charges one Hit takes (CONTRACT §6). A Result
// holds the state of each charged bucket in a fixed array of this size, so
// that a Hit allocates nothing for it (G10). A webhook edge charges two
// (hooks, bytes); every slot is 40 bytes that each Result carries and
// copies, whether used or not, so the array is kept small.
const MaxCharges = 4

// Bucket is the state of one charged bucket after a Hit's decision
// (CONTRACT G10), in whole microseconds.
//
// A driver sets ResetAfter only; the Store sets Kind, Headroom and Denied
// from it and the Hit's charges, so that they always agree.
type Bucket struct {
	// Kind is the charge's kind (set by the Store).
	Kind Kind
	// ResetAfter is the time until the bucket is full again: the TAT's
	// lead over now after the decision, max(tat - now, 0), whole µs. A
	// charge taken leaves it at least its increment; a Hit that took
	// nothing (RateLimited, Duplicate, Pending, the own-retry OK) reports
	// the bucket as it stands.
	ResetAfter time.Duration
	// Headroom is what is left: the capacity minus the TAT's lead over now,
	// max(capacity - ResetAfter, 0), whole µs (set by the Store). A charge
	// of increment I conforms now when I ≤ Headroom; turned into units it
	// is rounded down (Limit.Remaining), never over-stating what is left.
	Headroom time.Duration
	// Denied is set on the charges of a RateLimited Hit that do not
	// conform (increment > Headroom), the kinds that denied it (set by the
	// Store). Never set for another outcome, but on a shadow charge.
	Denied bool
	// Shadow is set on a shadow charge's bucket (set by the Store). Its
	// Denied says it would have denied: on OK, the charge took the bucket
	// past Capacity; on RateLimited, it did not conform either (CONTRACT §1.2).
	Shadow bool
	// Used is, for a window charge (Charge.Window), the units counted in
	// its window after the decision: what the Hit took included when it
	// was taken. Its ResetAfter is then the time until the window's end
	// (whole µs, ≥ 1µs), when the count starts over, and Headroom is
	// zero; Denied and Shadow read as for a bucket. Zero for a GCRA
	// charge. A driver sets it.
	Used int64
}

// Result is the answer to a Hit.
type Result struct {
	Outcome Outcome
	// HookID is the hook that committed the key (Duplicate only).
	HookID string
	// RetryAfter is when to come back (Pending, RateLimited): whole
	// milliseconds, ≥ 1ms, rounded up (G2).
	RetryAfter time.Duration
	// Local is set by the Store, never by a driver: the Hit was decided
	// from this node's own state because the shared store was out (the
	// Store's fallback, CONTRACT §8). A driver's Result with Local set is
	// ErrUnavailable.
	Local bool
	// NBuckets is how many of Buckets are set: the number of the Hit's
	// charges, whatever the outcome (G10). A driver sets it.
	NBuckets int
	// Buckets[i] is the state of the bucket that charges[i] charged, after
	// the decision (G10); entries from NBuckets on are zero. Read them
	// with Quota.
	Buckets [MaxCharges]Bucket
}

// Quota returns the state of every charged bucket after the decision, one
// per charge of the Hit, in the charges' order (CONTRACT G10): empty for a
// Hit without charges. The slice aliases r.
func (r *Result) Quota() []Bucket { return r.Buckets[:min(max(r.NBuckets, 0), MaxCharges)] }
