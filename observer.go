package fleetstore

import (
	"context"
	"errors"
	"time"
)

// Observer is told of every call a Store makes for its caller (WithObserver,
// CONTRACT §1.5): one Event per Hit, Commit, Release, Reset and Ping, and one
// per batch the degraded mode replays. Observe runs on the caller's
// goroutine after the call, before it returns, with the caller's context
// (its span is the parent of a span the observer makes, its values reach
// exemplars); it must be safe for concurrent use, must not block and must
// not panic: on a caller's call (Hit, Commit, …) a panic reaches the
// caller, on a replay event (the probe goroutine) the Store recovers it,
// drops the event and logs the first such panic (its value's type only).
// The
// Event is a value: keeping it costs the call nothing, and the memory Hit
// stays without allocation (BenchmarkHit). An Event never holds a tenant, a
// key, a hook id or a node: what the observer does not get it cannot label
// with.
//
// package fleetotel (its own module, github.com/fleetstore/fleetstore/fleetotel)
// implements it with OpenTelemetry metrics and spans.
type Observer interface {
	Observe(ctx context.Context, e Event)
}

// StoreObserver is an Observer that is also told of the Store it observes:
// Attach once Open has made it, before Open returns (an error fails Open
// with ErrInvalid naming "observer", the Store closed again), and Detach
// when Close has closed it. Its gauges read StoreInfo.Stats.
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
	// Stats is Store.Stats: the degraded mode's state, its outbox's
	// length and counters (zero without a fallback). Safe to call at any
	// time, also after Close.
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
	OpReplay                // one replayed batch of the outbox's commits (CONTRACT §8), from the probe goroutine
)

var opNames = [...]string{OpHit: "hit", OpCommit: "commit", OpRelease: "release", OpReset: "reset", OpPing: "ping", OpReplay: "replay"}

// String returns the op's name as in the Store's errors ("hit", "commit",
// "release", "reset", "ping", "replay"), or "" for another value.
func (o Op) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return ""
}

// ErrorClass sorts the error a call returned, as errors.Is sorts it
// against this package's sentinels (CONTRACT §1.3). The zero value,
// NoError, is a call that returned nil.
type ErrorClass uint8

// Error classes, in the order they are tested: the first that matches.
const (
	NoError               ErrorClass = iota
	ClassClosed                      // ErrClosed
	ClassInvalid                     // ErrInvalid
	ClassOverCapacity                // ErrOverCapacity
	ClassCancelled                   // context.Canceled: the caller gave up
	ClassClaimLost                   // ErrClaimLost
	ClassAlreadyCommitted            // ErrAlreadyCommitted
	ClassTimeout                     // ErrTimeout
	ClassUnavailable                 // ErrUnavailable
	ClassOther                       // none of them (a driver that breaks the contract)
)

var classNames = [...]string{NoError: "", ClassClosed: "closed", ClassInvalid: "invalid", ClassOverCapacity: "over_capacity",
	ClassCancelled: "cancelled", ClassClaimLost: "claim_lost", ClassAlreadyCommitted: "already_committed",
	ClassTimeout: "timeout", ClassUnavailable: "unavailable", ClassOther: "_OTHER"}

// String returns the class's name, a low-cardinality snake_case word fit
// for OpenTelemetry's error.type: "closed", "invalid", "over_capacity",
// "cancelled", "claim_lost", "already_committed", "timeout",
// "unavailable", and "_OTHER" (the convention's fallback); "" for NoError.
func (c ErrorClass) String() string {
	if int(c) < len(classNames) {
		return classNames[c]
	}
	return ""
}

var classOf = [...]struct {
	target error
	class  ErrorClass
}{
	{ErrClosed, ClassClosed}, {ErrInvalid, ClassInvalid}, {ErrOverCapacity, ClassOverCapacity},
	{context.Canceled, ClassCancelled}, {ErrClaimLost, ClassClaimLost}, {ErrAlreadyCommitted, ClassAlreadyCommitted},
	{ErrTimeout, ClassTimeout}, {ErrUnavailable, ClassUnavailable},
}

// ClassOf returns err's class: NoError for nil, else the first of the
// classes that errors.Is matches, ClassOther for none. A batch settle's
// joined ClaimErrors are classed by the first failed claim's own error.
func ClassOf(err error) ErrorClass {
	if err == nil {
		return NoError
	}
	var ce *ClaimError
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
	// Err is the class of the error the call returned (NoError: nil).
	Err ErrorClass
	// Outcome is a Hit's decision when Err is NoError: OK, Duplicate,
	// Pending or RateLimited; 0 for the other ops and a failed Hit.
	Outcome Outcome
	// Local is set when the degraded mode decided the call from this
	// node's own state (CONTRACT §8): a Hit with Result.Local, a Commit
	// queued in the outbox or a Release made locally (for a batch: any of
	// its claims). Reset and Ping are never local.
	Local bool
	// Charges is how many charges the Hit had (0–MaxCharges).
	Charges int
	// Claims is how many claims the call had: a Hit 0 or 1; a Commit,
	// Release or replayed batch the batch's size.
	Claims int
	// Failed is how many claims of a Commit, Release or replay failed
	// (C10): every claim when the whole call failed.
	Failed int
	// NDenied is how many of Denied are set: the kinds of the charges
	// that denied a RateLimited Hit (G10), in the charges' order; 0 for
	// any other outcome.
	NDenied int
	Denied  [MaxCharges]Kind
}

// DeniedKinds returns the kinds that denied a RateLimited Hit: Denied's
// first NDenied. The slice aliases e.
func (e *Event) DeniedKinds() []Kind { return e.Denied[:min(max(e.NDenied, 0), MaxCharges)] }

// WithObserver sets the Store's Observer (CONTRACT §1.5): every call is
// reported to o. Default none; nil keeps none. One that is also a
// StoreObserver is attached to the Store at Open and detached at Close.
func WithObserver(o Observer) Option {
	return func(opts *options) { opts.observer = o }
}

// observeHit reports a Hit to the observer.
func (s *Store) observeHit(ctx context.Context, start time.Time, charges int, claim bool, res *Result, err error) {
	e := Event{Op: OpHit, Start: start, Duration: time.Since(start), Charges: min(charges, MaxCharges)}
	if claim {
		e.Claims = 1
	}
	if err != nil {
		e.Err = ClassOf(err)
	} else {
		e.Outcome, e.Local = res.Outcome, res.Local
		if res.Outcome == RateLimited {
			for _, b := range res.Quota() {
				if b.Denied {
					e.Denied[e.NDenied] = b.Kind
					e.NDenied++
				}
			}
		}
	}
	s.obs.Observe(ctx, e)
}

// observeSettle reports a Commit, Release or replayed batch of n claims.
func (s *Store) observeSettle(ctx context.Context, op Op, start time.Time, n int, local bool, err error) {
	e := Event{Op: op, Start: start, Duration: time.Since(start), Claims: n, Local: local}
	if err != nil {
		e.Err = ClassOf(err)
		e.Failed = failedClaims(err, n)
	}
	s.obs.Observe(ctx, e)
}

// failedClaims counts the claims err fails out of n: its ClaimErrors, or
// all n for the failure of the whole call.
func failedClaims(err error, n int) int {
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		var ce *ClaimError
		if errors.As(err, &ce) {
			return 1
		}
		return n
	}
	k := 0
	for _, e := range j.Unwrap() {
		var ce *ClaimError
		if errors.As(e, &ce) {
			k++
		}
	}
	if k == 0 {
		return n
	}
	return k
}

// observe reports a Reset or Ping.
func (s *Store) observe(ctx context.Context, op Op, start time.Time, err error) {
	s.obs.Observe(ctx, Event{Op: op, Start: start, Duration: time.Since(start), Err: ClassOf(err)})
}
