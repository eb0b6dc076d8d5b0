// Package fault sorts a driver's error, once, for the Store and its
// degraded mode (CONTRACT §1): what the error says of the store (Classify),
// the sentinel to add to its message, and the error a Store method
// returns (Error). It also bounds a call by the Store's budget (Budget,
// CONTRACT T1). The root package and internal/degraded share it, as
// gocloud's packages share internal/gcerr.
package fault

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/fleetstore/fleetstore/driver"
)

// Error is every error a Store method returns: "fleetstore: OP: [KIND: ]ERR".
// It unwraps to both the sentinel Kind (when the driver did not classify
// the error itself) and the driver's error, so errors.Is(err,
// ErrTimeout) and errors.As(err, &driverErr) both work.
type Error struct {
	op   string
	kind error // nil when err already matches a sentinel
	err  error
}

// New is err, a refusal the Store made itself (ErrClosed, ErrInvalid, a
// context done before the call), as op's error.
func New(op string, err error) *Error { return &Error{op: op, err: err} }

// Wrap is err, a driver error that Classify sorted under kind, as op's
// error.
func Wrap(op string, kind, err error) *Error {
	if kind == context.Canceled &&
		(errors.Is(err, driver.ErrTimeout) || errors.Is(err, driver.ErrUnavailable)) {
		err = cancelled{err}
	}
	return &Error{op: op, kind: kind, err: err}
}

func (e *Error) Error() string {
	if e.kind == nil {
		return "fleetstore: " + e.op + ": " + e.err.Error()
	}
	return "fleetstore: " + e.op + ": " + e.kind.Error() + ": " + e.err.Error()
}

// Unwrap returns the sentinel and the driver's error.
func (e *Error) Unwrap() []error {
	if e.kind == nil {
		return []error{e.err}
	}
	return []error{e.kind, e.err}
}

// outcomes are the sentinels a driver returns as the server's answer to a
// call: the store was reached.
var outcomes = []error{driver.ErrClaimLost, driver.ErrAlreadyCommitted}

// refusals are the sentinels a driver returns without asking the server
// (a closed Conn, an argument it cannot take): they say nothing of the
// store.
var refusals = []error{driver.ErrClosed, driver.ErrInvalid, driver.ErrOverCapacity}

// Class is what a driver error says of the store.
type Class int

const (
	Answered Class = iota // the server answered (an outcome, an error reply)
	Outage                // the server did not answer: timeout, unreachable
	Caller                // the caller gave up: says nothing of the store
)

// Classify sorts a driver error met within ctx, for every driver
// (CONTRACT §1): outcomes and errors the driver marked as the server's
// reply are kept; a call the caller cancelled matches context.Canceled; a
// deadline that passed (the context's, a socket's) is ErrTimeout unless
// the driver already said ErrUnavailable; anything else is
// ErrUnavailable. kind is the sentinel to add to the message (nil when err
// already matches one): Wrap takes it.
func Classify(ctx context.Context, err error) (c Class, kind error) {
	for _, o := range outcomes {
		if errors.Is(err, o) {
			return Answered, nil
		}
	}
	for _, r := range refusals {
		if errors.Is(err, r) {
			return Caller, nil
		}
	}
	var reply *driver.ReplyError
	if errors.As(err, &reply) {
		return Answered, driver.ErrUnavailable
	}
	switch {
	case errors.Is(ctx.Err(), context.Canceled):
		// The caller gave up; whatever the driver saw after that (a
		// socket deadline moved to the past) says nothing of the store.
		if errors.Is(err, driver.ErrTimeout) || errors.Is(err, driver.ErrUnavailable) {
			return Caller, context.Canceled // hides them: see cancelled
		}
		if errors.Is(err, context.Canceled) {
			return Caller, nil
		}
		return Caller, context.Canceled
	case errors.Is(err, driver.ErrTimeout), errors.Is(err, driver.ErrUnavailable):
		return Outage, nil
	case timedOut(ctx, err):
		return Outage, driver.ErrTimeout
	}
	return Outage, driver.ErrUnavailable
}

// Degradable reports an error a fallback decides locally on (CONTRACT §8),
// as Classify sorted it: ErrTimeout or ErrUnavailable, the server silent
// or refusing (an error reply included); never an outcome, an invalid
// argument or the caller's own cancellation.
func Degradable(c Class, kind error) bool {
	return c == Outage || c == Answered && kind == driver.ErrUnavailable
}

// timedOut reports a deadline that passed: err says so (the context's, a
// socket's, a dial's), or the call's own deadline has passed, before its
// timer may have cancelled the context.
func timedOut(ctx context.Context, err error) bool {
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) ||
		errors.As(err, &ne) && ne.Timeout() || errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return true
	}
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}

// cancelled is a driver error met by a call the caller cancelled: it
// matches context.Canceled and no sentinel of the Store's, even when the
// driver marked it ErrTimeout or ErrUnavailable (the caller's cancellation
// says nothing of the store), while errors.As still finds the driver's
// own error types.
type cancelled struct{ err error }

func (e cancelled) Error() string { return e.err.Error() }

// Is makes errors.Is(err, context.Canceled) true.
func (e cancelled) Is(target error) bool { return target == context.Canceled }

// As finds the driver's own error types.
func (e cancelled) As(target any) bool { return errors.As(e.err, target) }

var noCancel = context.CancelFunc(func() {})

// Budget returns ctx bounded by timeout, the Store's per-call budget (T1).
// A context that is already done fails at once, without a driver call
// (Done gives its error). needsTimer false (a conn whose calls never wait,
// or that bounds its own) only checks ctx. A caller's deadline within
// the budget is the budget: no timer is armed.
func Budget(ctx context.Context, timeout time.Duration, needsTimer bool) (context.Context,
	context.CancelFunc, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, Done(err)
	}
	if !needsTimer {
		return ctx, noCancel, nil
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= timeout {
		return ctx, noCancel, nil
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	return ctx, cancel, nil
}

// Done is the error of a call whose context was done before it began:
// ErrTimeout for a passed deadline (T1), the cancellation as it is.
func Done(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: %w", driver.ErrTimeout, err)
	}
	return err
}
