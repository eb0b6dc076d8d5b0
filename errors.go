package fleetstore

import (
	"context"
	"errors"
	"fmt"
	"net"
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

// claimError names the claim of a batch Commit or Release that failed (C10).
type claimError struct {
	index               int
	tenant, source, key string
	err                 error
}

func (e *claimError) Error() string {
	return fmt.Sprintf("claims[%d] (tenant %.64q, source_id %.64q, key %.64q): %v", e.index, e.tenant, e.source, e.key, e.err)
}

func (e *claimError) Unwrap() error { return e.err }

var sentinels = []error{ErrTimeout, ErrUnavailable, ErrClaimLost, ErrAlreadyCommitted, ErrClosed, ErrInvalid, ErrOverCapacity}

// wrap classifies a driver error once: kept as is when it already matches a
// sentinel or is the caller's own cancellation; ErrTimeout when the budget
// ran out; ErrUnavailable for anything else.
func wrap(ctx context.Context, op string, err error) error {
	for _, sentinel := range sentinels {
		if errors.Is(err, sentinel) {
			return &opError{op: op, err: err}
		}
	}
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(ctx.Err(), context.DeadlineExceeded),
		errors.As(err, &ne) && ne.Timeout():
		return &opError{op: op, kind: ErrTimeout, err: err}
	case errors.Is(err, context.Canceled):
		return &opError{op: op, err: err}
	}
	return &opError{op: op, kind: ErrUnavailable, err: err}
}
