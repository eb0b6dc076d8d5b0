package driver

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
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

// CheckParams returns an ErrInvalid error naming the first URL parameter in
// q that is not in accepted, listing the accepted ones (the common timeout
// and key_prefix included). Drivers call it from Open.
func CheckParams(q url.Values, accepted ...string) error {
	keys := make([]string, 0, len(q))
	for k := range q {
		if !slices.Contains(accepted, k) {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	slices.Sort(keys)
	all := append([]string{"timeout", "key_prefix"}, accepted...)
	return Invalid("url: "+keys[0], "unknown parameter (accepted: "+strings.Join(all, ", ")+")")
}
