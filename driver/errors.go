package driver

import (
	"context"
	"errors"
	"fmt"
)

// The sentinel errors of CONTRACT §1. The root package re-exports each one
// (fleetstore.ErrTimeout == driver.ErrTimeout), so a driver that wraps them
// is matched by errors.Is against the root's names.
var (
	// ErrInvalid: a bad argument or URL; the message names the field.
	ErrInvalid = errors.New("invalid argument")
	// ErrOverCapacity: a charge's increment exceeds its capacity (G6).
	ErrOverCapacity = errors.New("increment exceeds capacity")
	// ErrTimeout: the call's budget ran out (T1). It also matches
	// context.DeadlineExceeded.
	ErrTimeout error = timeoutError{}
	// ErrUnavailable: the store cannot be reached or refused the call (T2).
	ErrUnavailable = errors.New("store unavailable")
	// ErrClosed: the Store was closed (T6).
	ErrClosed = errors.New("store closed")
	// ErrClaimLost: the claim is held by another hook (C8).
	ErrClaimLost = errors.New("claim lost")
	// ErrAlreadyCommitted: release of a committed claim (C6).
	ErrAlreadyCommitted = errors.New("claim already committed")
	// ErrUnknownScheme: Open was given a scheme no driver registered.
	ErrUnknownScheme = errors.New("unknown scheme")
)

type timeoutError struct{}

func (timeoutError) Error() string { return "timeout" }

// Timeout reports true, as net.Error does for timeouts.
func (timeoutError) Timeout() bool { return true }

// Is makes errors.Is(ErrTimeout, context.DeadlineExceeded) true.
func (timeoutError) Is(target error) bool { return target == context.DeadlineExceeded }

// ClaimLostError is the error of a settle on a claim held by another hook
// (C8). It matches ErrClaimLost.
type ClaimLostError struct {
	Holder string // the hook_id that holds the claim
}

func (e *ClaimLostError) Error() string {
	return fmt.Sprintf("claim lost: held by hook %q", e.Holder)
}

// Is makes errors.Is(err, ErrClaimLost) true.
func (e *ClaimLostError) Is(target error) bool { return target == ErrClaimLost }

// ClaimError is the error a Store returns for one claim of a batch Commit
// or Release that failed (C10); drivers do not return it. Index is the
// claim's place in the batch, Tenant, SourceID and Key name it, Err is its
// own error (ErrClaimLost, ErrAlreadyCommitted, or a timeout that reached
// it mid-batch). A batch's failures are joined, one *ClaimError each, so
// errors.As finds the first and a type switch over the joined errors finds
// them all; a failure of the whole call is one error, not a ClaimError.
// Its message quotes Tenant, SourceID and Key, each cut to 64 characters.
type ClaimError struct {
	Index                 int
	Tenant, SourceID, Key string
	Err                   error
}

func (e *ClaimError) Error() string {
	return fmt.Sprintf("claims[%d] (tenant %.64q, source_id %.64q, key %.64q): %v",
		e.Index, e.Tenant, e.SourceID, e.Key, e.Err)
}

// Unwrap returns the claim's own error.
func (e *ClaimError) Unwrap() error { return e.Err }

// ErrorReply marks err as the server's own error reply to a call: an
// error the server answered with, or a reply the driver cannot decode
// (V4). It returns a *ReplyError wrapping err. The Store reports it as
// ErrUnavailable (the store refused the call) but not as an outage: the
// server was reached. ErrorReply(nil) is nil.
func ErrorReply(err error) error {
	if err == nil {
		return nil
	}
	return &ReplyError{Err: err}
}

// ReplyError is an error the server answered with; see [ErrorReply]. It
// matches ErrUnavailable and unwraps to the client's error.
type ReplyError struct {
	Err error
}

func (e *ReplyError) Error() string { return e.Err.Error() }

// Unwrap returns the client's error.
func (e *ReplyError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrUnavailable) true.
func (e *ReplyError) Is(target error) bool { return target == ErrUnavailable }

// Invalid returns an ErrInvalid error naming field and why, e.g.
// Invalid("claim.key", "must be 1–1024 bytes, got 0").
func Invalid(field, why string) error {
	return &InvalidError{Field: field, Reason: why}
}

// InvalidError is a bad argument (V1). It matches ErrInvalid.
type InvalidError struct {
	Field  string // e.g. "charges[1].kind", "claim.ttl", "url: timeout"
	Reason string
}

func (e *InvalidError) Error() string {
	return "invalid " + e.Field + ": " + e.Reason
}

// Is makes errors.Is(err, ErrInvalid) true.
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }
