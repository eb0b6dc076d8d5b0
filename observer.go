package fleetstore

import (
	"context"
	"errors"
	"time"

	"github.com/fleetstore/fleetstore/observe"
)

// WithObserver sets the Store's observer (CONTRACT §1.5): every call is
// reported to o as an observe.Event, on the caller's goroutine. Default
// none; nil keeps none. One that is also an observe.StoreObserver is
// attached to the Store at Open (its error fails Open with ErrInvalid
// naming "observer") and detached at Close.
func WithObserver(o observe.Observer) Option {
	return func(opts *options) { opts.observer = o }
}

// observeHit reports a Hit to the observer.
func (s *Store) observeHit(ctx context.Context, start time.Time, charges int, claim bool,
	res *Result, err error) {
	e := observe.Event{Op: observe.OpHit, Start: start, Duration: time.Since(start),
		Charges: min(charges, MaxCharges)}
	if claim {
		e.Claims = 1
	}
	if err != nil {
		e.Class = observe.ClassOf(err)
	} else {
		e.Outcome, e.Local = res.Outcome, res.Local
		for _, b := range res.Quota() {
			switch {
			case b.Denied && b.Shadow:
				e.ShadowDenied[e.NShadowDenied] = b.Kind
				e.NShadowDenied++
			case b.Denied:
				e.Denied[e.NDenied] = b.Kind
				e.NDenied++
			}
		}
	}
	s.obs.Observe(ctx, e)
}

// observeSettle reports a Commit, Release or replayed batch of n claims.
func (s *Store) observeSettle(ctx context.Context, op observe.Op, start time.Time, n int,
	local bool, err error) {
	e := observe.Event{Op: op, Start: start, Duration: time.Since(start), Claims: n, Local: local}
	if err != nil {
		e.Class = observe.ClassOf(err)
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
func (s *Store) observe(ctx context.Context, op observe.Op, start time.Time, err error) {
	s.obs.Observe(ctx, observe.Event{Op: op, Start: start, Duration: time.Since(start),
		Class: observe.ClassOf(err)})
}
