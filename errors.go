package fleetstore

import (
	"context"
	"errors"
	"net"
	"os"
	"time"

	"github.com/fleetstore/fleetstore/driver"
)

// opError is every error a Store method returns: "fleetstore: OP: [KIND: ]ERR".
// It unwraps to both the sentinel KIND (when the driver did not classify the
// error itself) and the driver's error, so errors.Is(err, ErrTimeout) and
// errors.As(err, &driverErr) both work.
type opError struct {
	op   string
	kind error // nil when err already matches a sentinel
	err  error
}

func (e *opError) Error() string {
	if e.kind == nil {
		return "fleetstore: " + e.op + ": " + e.err.Error()
	}
	return "fleetstore: " + e.op + ": " + e.kind.Error() + ": " + e.err.Error()
}

func (e *opError) Unwrap() []error {
	if e.kind == nil {
		return []error{e.err}
	}
	return []error{e.kind, e.err}
}

// outcomes are the sentinels a driver returns as the server's answer to a
// call: the store was reached.
var outcomes = []error{ErrClaimLost, ErrAlreadyCommitted}

// refusals are the sentinels a driver returns without asking the server
// (a closed Conn, an argument it cannot take): they say nothing of the
// store.
var refusals = []error{ErrClosed, ErrInvalid, ErrOverCapacity}

// fault is what a driver error says of the store.
type fault int

const (
	answered fault = iota // the server answered (an outcome, an error reply)
	outage                // the server did not answer: timeout, unreachable
	caller                // the caller gave up: says nothing of the store
	wrapped               // classified already, by the degraded mode (Store.classified)
)

// classify sorts a driver error, once, for every driver (CONTRACT §1):
// outcomes and errors the driver marked as the server's reply are kept;
// a call the caller cancelled matches context.Canceled; a deadline that passed (the
// context's, a socket's) is ErrTimeout unless the driver already said
// ErrUnavailable; anything else is ErrUnavailable. kind is the sentinel to
// add to the message (nil when err already matches one).
func classify(ctx context.Context, err error) (f fault, kind error) {
	for _, o := range outcomes {
		if errors.Is(err, o) {
			return answered, nil
		}
	}
	for _, r := range refusals {
		if errors.Is(err, r) {
			return caller, nil
		}
	}
	var reply *driver.ReplyError
	if errors.As(err, &reply) {
		return answered, ErrUnavailable
	}
	switch {
	case errors.Is(ctx.Err(), context.Canceled):
		// The caller gave up; whatever the driver saw after that (a
		// socket deadline moved to the past) says nothing of the store.
		if errors.Is(err, ErrTimeout) || errors.Is(err, ErrUnavailable) {
			return caller, context.Canceled // hides them: see cancelled
		}
		if errors.Is(err, context.Canceled) {
			return caller, nil
		}
		return caller, context.Canceled
	case errors.Is(err, ErrTimeout), errors.Is(err, ErrUnavailable):
		return outage, nil
	case timedOut(ctx, err):
		return outage, ErrTimeout
	}
	return outage, ErrUnavailable
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

// opErr wraps a driver error that classify sorted under kind, once.
func opErr(op string, kind, err error) *opError {
	if kind == context.Canceled && (errors.Is(err, ErrTimeout) || errors.Is(err, ErrUnavailable)) {
		err = cancelled{err}
	}
	return &opError{op: op, kind: kind, err: err}
}

// cancelled is a driver error met by a call the caller cancelled: it
// matches context.Canceled and no sentinel of this package, even when the
// driver marked it ErrTimeout or ErrUnavailable (the caller's cancellation
// says nothing of the store), while errors.As still finds the driver's
// own error types.
type cancelled struct{ err error }

func (e cancelled) Error() string { return e.err.Error() }

// Is makes errors.Is(err, context.Canceled) true.
func (e cancelled) Is(target error) bool { return target == context.Canceled }

// As finds the driver's own error types.
func (e cancelled) As(target any) bool { return errors.As(e.err, target) }
