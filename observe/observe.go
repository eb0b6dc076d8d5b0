// Package observe is how a fleetstore Store reports its calls: the
// Observer a Store is given (fleetstore.WithObserver, CONTRACT §1.5), the
// Event it is told of each call, and the Stats of the Store's degraded
// mode (fleetstore.Store.FallbackStats).
//
// An Event never holds a tenant, a key, a hook id or a node: what an
// observer does not get it cannot label with. Package fleetotel (its own
// module, github.com/fleetstore/fleetstore/fleetotel) implements Observer
// with OpenTelemetry metrics and spans.
package observe

import (
	"context"
	"errors"
	"time"

	"github.com/fleetstore/fleetstore/driver"
)

// Observer is told of every call a Store makes for its caller: one Event
// per Hit, Commit, Release, Reset, Ping and Peek, and one per batch the
// degraded mode replays. Observe runs on the caller's goroutine after the
// call, before it returns, with the caller's context (its span is the
// parent of a span the observer makes, its values reach exemplars). It must
// be safe for concurrent use, must not block and must not panic: on a
// caller's call a panic reaches the caller; on a replay event (the probe
// goroutine) the Store recovers it, drops the event and logs the first such
// panic (its value's type only). The Event is a value: keeping it costs the
// call nothing, and the memory Hit stays without allocation.
type Observer interface {
	Observe(ctx context.Context, e Event)
}

// StoreObserver is an Observer that is also told of the Store it
// observes: Attach once Open has made it, before Open returns (an error
// fails Open with ErrInvalid naming "observer", the Store closed again),
// and Detach when Close has closed it. Its gauges read StoreInfo.Stats.
type StoreObserver interface {
	Observer
	Attach(StoreInfo) error
	Detach()
}

// StoreInfo describes an observed Store (StoreObserver.Attach).
type StoreInfo struct {
	// Scheme is the URL's scheme: "memory", "redis", "rediss",
	// "redis+cluster", "valkey", "memcached", … (a driver's own).
	Scheme string
	// Fallback says the Store has the degraded mode (WithFallback).
	Fallback bool
	// Stats is the Store's Store.FallbackStats: zero Stats without a fallback.
	// Safe to call at any time, also after Close.
	Stats func() Stats
}

// Op is the call an Event reports.
type Op uint8

// The calls an Observer is told of.
const (
	OpHit     Op = iota + 1 // Store.Hit
	OpCommit                // Store.Commit
	OpRelease               // Store.Release
	OpReset                 // Store.Reset
	OpPing                  // Store.Ping
	// OpReplay is one replayed batch of the outbox's commits (CONTRACT
	// §8), reported from the probe goroutine.
	OpReplay
	OpPeek // Store.Peek
)

var opNames = [...]string{
	OpHit: "hit", OpCommit: "commit", OpRelease: "release",
	OpReset: "reset", OpPing: "ping", OpReplay: "replay", OpPeek: "peek",
}

// String returns the op's name as in the Store's errors ("hit", "commit",
// "release", "reset", "ping", "replay", "peek"), or "" for another value.
func (o Op) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return ""
}

// Class sorts the error a call returned, as errors.Is sorts it against
// the sentinel errors (CONTRACT §1.3). The zero value, ClassNone, is a
// call that returned nil.
type Class uint8

// Error classes, in the order ClassOf tests them: the first that matches.
const (
	ClassNone             Class = iota // nil: no error
	ClassClosed                        // ErrClosed
	ClassInvalid                       // ErrInvalid
	ClassOverCapacity                  // ErrOverCapacity
	ClassCancelled                     // context.Canceled: the caller gave up
	ClassClaimLost                     // ErrClaimLost
	ClassAlreadyCommitted              // ErrAlreadyCommitted
	ClassTimeout                       // ErrTimeout
	ClassUnavailable                   // ErrUnavailable
	ClassOther                         // none of them (a driver that breaks the contract)
)

var classNames = [...]string{
	ClassNone: "", ClassClosed: "closed", ClassInvalid: "invalid",
	ClassOverCapacity: "over_capacity", ClassCancelled: "cancelled",
	ClassClaimLost: "claim_lost", ClassAlreadyCommitted: "already_committed",
	ClassTimeout: "timeout", ClassUnavailable: "unavailable", ClassOther: "_OTHER",
}

// String returns the class's name, a low-cardinality snake_case word fit
// for OpenTelemetry's error.type: "closed", "invalid", "over_capacity",
// "cancelled", "claim_lost", "already_committed", "timeout",
// "unavailable", and "_OTHER" (the convention's fallback); "" for
// ClassNone.
func (c Class) String() string {
	if int(c) < len(classNames) {
		return classNames[c]
	}
	return ""
}

var classOf = [...]struct {
	target error
	class  Class
}{
	{driver.ErrClosed, ClassClosed},
	{driver.ErrInvalid, ClassInvalid},
	{driver.ErrOverCapacity, ClassOverCapacity},
	{context.Canceled, ClassCancelled},
	{driver.ErrClaimLost, ClassClaimLost},
	{driver.ErrAlreadyCommitted, ClassAlreadyCommitted},
	{driver.ErrTimeout, ClassTimeout},
	{driver.ErrUnavailable, ClassUnavailable},
}

// ClassOf returns err's class: ClassNone for nil, else the first of the
// classes that errors.Is matches, ClassOther for none. A batch Commit's or
// Release's joined *ClaimErrors are classed by the first failed claim's
// own error (not by the first class any claim matches).
func ClassOf(err error) Class {
	if err == nil {
		return ClassNone
	}
	var ce *driver.ClaimError
	if errors.As(err, &ce) {
		err = ce.Err
	}
	for _, c := range classOf {
		if errors.Is(err, c.target) {
			return c.class
		}
	}
	return ClassOther
}

// Event is one call a Store made (Observer.Observe). It is a value with no
// pointer to the call's arguments: no tenant, key, hook id or node.
type Event struct {
	// Op is the call.
	Op Op
	// Start is when the call began (wall and monotonic clock); Duration
	// how long it took, arguments' checks included, until it returned.
	Start    time.Time
	Duration time.Duration
	// Class is the class of the error the call returned (ClassNone: nil).
	Class Class
	// Outcome is a Hit's decision when Class is ClassNone: OK, Duplicate,
	// Pending or RateLimited; 0 for the other ops and a failed Hit.
	Outcome driver.Outcome
	// Local is set when the degraded mode decided the call from this
	// node's own state (CONTRACT §8): a Hit with Result.Local, a Commit
	// queued in the outbox, a Release made locally (for a batch: any of
	// its claims) or a Peek answered locally. Reset and Ping never are.
	Local bool
	// Charges is how many charges the Hit had, or limits the Peek read
	// (0–MaxCharges).
	Charges int
	// Claims is how many claims the call had: a Hit 0 or 1; a Commit,
	// Release or replayed batch the batch's size.
	Claims int
	// Failed is how many claims of a Commit, Release or replay failed
	// (C10): every claim when the whole call failed. A replayed commit
	// fails when it is kept queued or dropped for an error; one that met
	// another hook's claim is an outcome (Stats.Conflicts), not a failure.
	Failed int
	// NDenied is how many of Denied are set: the kinds of the charges
	// that denied a RateLimited Hit (G10), in the charges' order; 0 for
	// any other outcome.
	NDenied int
	Denied  [driver.MaxCharges]driver.Kind
	// NShadowDenied is how many of ShadowDenied are set: the kinds of the
	// shadow charges that would have denied the Hit (CONTRACT §1.2), in
	// the charges' order, whatever its outcome.
	NShadowDenied int
	ShadowDenied  [driver.MaxCharges]driver.Kind
}

// DeniedKinds returns the kinds that denied a RateLimited Hit: Denied's
// first NDenied. The slice aliases e.
func (e *Event) DeniedKinds() []driver.Kind {
	return e.Denied[:min(max(e.NDenied, 0), driver.MaxCharges)]
}

// ShadowDeniedKinds returns the kinds of the shadow charges that would
// have denied the Hit: ShadowDenied's first NShadowDenied. The slice
// aliases e.
func (e *Event) ShadowDeniedKinds() []driver.Kind {
	return e.ShadowDenied[:min(max(e.NShadowDenied, 0), driver.MaxCharges)]
}

// Stats is a snapshot of a Store's degraded mode (fleetstore.Store.FallbackStats,
// CONTRACT §8). The counters count from Open and never go down (metrics
// counters); Degraded and Outbox are gauges. A Store without a fallback
// returns zero Stats.
type Stats struct {
	// Degraded: deciding from this node's state now.
	Degraded bool
	// Outages: times the Store went degraded.
	Outages uint64
	// LocalDecisions: Hits decided from the local store.
	LocalDecisions uint64
	// Outbox: commits queued now, awaiting replay (those waiting for
	// another hook's pending claim included).
	Outbox int
	// Queued: commits queued in all (those read back from the outbox's
	// directory at Open included).
	Queued uint64
	// Replayed: queued commits recorded in the shared store.
	Replayed uint64
	// Conflicts: replayed commits that met another hook's committed
	// claim (Fallback.OnConflict).
	Conflicts uint64
	// Expired: queued commits whose TTL ran out before their replay, not
	// sent.
	Expired uint64
	// Dropped: commits not queued (the outbox was full, or its directory
	// failed), read back at Open past the outbox's size, or queued and
	// dropped after the shared store refused them 8 times.
	Dropped uint64
	// ClaimsDropped: local Hits decided without a local claim
	// (Fallback.LocalClaims was reached).
	ClaimsDropped uint64
}
