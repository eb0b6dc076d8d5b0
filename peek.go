package fleetstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/internal/fault"
	"github.com/fleetstore/fleetstore/observe"
)

// Peek reads tenant's buckets of limits without charging them (CONTRACT
// G11), in one round trip, writing nothing: for a dashboard, or an API
// answer of what a tenant has left (headers.Write takes its Result and
// limits as it takes a Hit's).
//
// res.Quota()[i] is the bucket of limits[i] as it stands at the store's
// now (G10, whole µs): its ResetAfter, its Headroom, which
// limits[i].Remaining turns into units, and Denied when one unit of it
// would not conform now (Shadow set for a shadow limit, which denies
// nothing). A bucket never charged is full. A quota's is its window's
// count, Used, and the time to the window's end, ResetAfter, in the
// window holding the store's clock (0 used when nothing was counted in
// it: CONTRACT Q6); Denied when one unit more would exceed it. res.Outcome is what a Hit of
// one unit of every limit, without a claim, would answer, nothing being
// taken: OK, or RateLimited with that Hit's RetryAfter (whole ms ≥ 1ms,
// rounded up).
//
// At most MaxCharges limits, each of its own kind; none returns OK without
// a round trip. A Peek checks, in order: Close, its arguments, the
// driver's capability, its context.
//
// Peek is a driver's optional capability (driver.Peeker), which every
// driver of this module has; on a Store whose driver lacks it, Peek
// returns an error matching errors.ErrUnsupported (Peek(ctx, tenant) with
// no limits tells, without a round trip).
//
// With a fallback (CONTRACT §8) a Peek is answered where a Hit would be
// decided: by the shared store while it answers; when it fails for an
// outage (which opens the breaker, as a Hit's does) or while the breaker
// is open, by this node's local store at its share of every limit, with
// Result.Local set and Headroom in the fleet's terms, as a local Hit
// reports it. ErrInvalid, ErrClosed and the caller's cancellation or
// passed deadline are returned as without one.
//
// Errors: ErrInvalid (naming the field: tenant, limits, limits[i],
// limits[i].kind), errors.ErrUnsupported, ErrTimeout, ErrUnavailable,
// ErrClosed.
func (s *Store) Peek(ctx context.Context, tenant string, limits ...Limit) (Result, error) {
	if s.obs == nil {
		return s.peek(ctx, tenant, limits)
	}
	start := time.Now()
	res, err := s.peek(ctx, tenant, limits)
	e := observe.Event{Op: observe.OpPeek, Start: start, Duration: time.Since(start),
		Class: observe.ClassOf(err), Local: res.Local, Charges: min(len(limits), MaxCharges)}
	s.obs.Observe(ctx, e)
	return res, err
}

// peek is Peek without the observer.
func (s *Store) peek(ctx context.Context, tenant string, limits []Limit) (res Result, err error) {
	if s.closed.Load() {
		return Result{}, fault.New("peek", ErrClosed)
	}
	var buf [MaxCharges]Charge
	charges, err := peekCharges(buf[:0], tenant, limits, s.now())
	if err != nil {
		return Result{}, fault.New("peek", err)
	}
	if !s.canPeek {
		return Result{}, fault.New("peek", fmt.Errorf(
			"the %s driver cannot read buckets uncharged (no driver.Peeker): %w", s.scheme,
			errors.ErrUnsupported))
	}
	if len(charges) == 0 {
		if err := ctx.Err(); err != nil {
			return Result{}, fault.New("peek", fault.Done(err))
		}
		return Result{Outcome: OK}, nil
	}
	err = s.call(ctx, "peek", func(ctx context.Context) (err error) {
		res, err = s.conn.Peek(ctx, charges)
		return err
	})
	if err != nil {
		return Result{}, err
	}
	return res, nil
}

// peekCharges checks a Peek's arguments (CONTRACT §6) and appends to buf
// the charge of one unit of every limit to tenant's bucket, a quota's
// windows those around now.
func peekCharges(buf []Charge, tenant string, limits []Limit, now time.Time) ([]Charge, error) {
	if err := checkPart("tenant", tenant, maxPartLen); err != nil {
		return nil, err
	}
	if len(limits) > MaxCharges {
		return nil, driver.Invalid("limits", "at most "+strconv.Itoa(MaxCharges)+
			" limits per Peek, got "+strconv.Itoa(len(limits)))
	}
	// Field names are built only on failure: a valid Peek allocates
	// nothing here.
	field := func(i int) string { return "limits[" + strconv.Itoa(i) + "]" }
	for i, l := range limits {
		if !l.valid() {
			return nil, driver.Invalid(field(i),
				"the zero Limit: make limits with NewLimit, PerSecond, NewByteLimit or NewQuota")
		}
		for j := range i {
			if limits[j].kind == l.kind {
				return nil, driver.Invalid(field(i)+".kind",
					fmt.Sprintf("kind %q peeked twice in one Peek", string(l.kind)))
			}
		}
		c := l.ChargeAt(tenant, 1, now)
		if c.IsWindow() {
			// A quota's windows around this node's clock: invalid only
			// for a clock out of range (before 1970).
			if err := checkWindow("limits", i, &c); err != nil {
				return nil, err
			}
		}
		buf = append(buf, c)
	}
	return buf, nil
}
