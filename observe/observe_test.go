package observe_test

import (
	"context"
	"errors"
	"testing"

	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/observe"
)

// TestClassOf: every sentinel has its class, in the documented order.
func TestClassOf(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		err  error
		want observe.Class
		name string
	}{
		{nil, observe.ClassNone, ""},
		{driver.ErrClosed, observe.ClassClosed, "closed"},
		{&driver.InvalidError{Field: "x"}, observe.ClassInvalid, "invalid"},
		{driver.ErrOverCapacity, observe.ClassOverCapacity, "over_capacity"},
		{context.Canceled, observe.ClassCancelled, "cancelled"},
		{&driver.ClaimLostError{Holder: "h"}, observe.ClassClaimLost, "claim_lost"},
		{driver.ErrAlreadyCommitted, observe.ClassAlreadyCommitted, "already_committed"},
		{context.DeadlineExceeded, observe.ClassOther, "_OTHER"},
		{driver.ErrTimeout, observe.ClassTimeout, "timeout"},
		{errors.Join(driver.ErrUnavailable), observe.ClassUnavailable, "unavailable"},
		{errors.New("x"), observe.ClassOther, "_OTHER"},
		// A batch is classed by its first failed claim, not by the first
		// class any claim matches (ClaimLost is tested before Timeout).
		{errors.Join(&driver.ClaimError{Err: driver.ErrTimeout},
			&driver.ClaimError{Err: driver.ErrClaimLost}), observe.ClassTimeout, "timeout"},
		{errors.Join(&driver.ClaimError{Index: 1, Err: driver.ErrAlreadyCommitted},
			&driver.ClaimError{Index: 2, Err: driver.ErrClaimLost}), observe.ClassAlreadyCommitted,
			"already_committed"},
	} {
		if got := observe.ClassOf(tt.err); got != tt.want || got.String() != tt.name {
			t.Errorf("ClassOf(%v) = %v (%q), want %v (%q)", tt.err, got, got, tt.want, tt.name)
		}
	}
	for op, name := range map[observe.Op]string{observe.OpHit: "hit", observe.OpCommit: "commit",
		observe.OpRelease: "release", observe.OpReset: "reset", observe.OpPing: "ping",
		observe.OpReplay: "replay", 0: "", 200: ""} {
		if op.String() != name {
			t.Errorf("Op(%d) = %q, want %q", op, op.String(), name)
		}
	}
}

// TestDeniedKinds: DeniedKinds is Denied's first NDenied, whatever NDenied
// holds.
func TestDeniedKinds(t *testing.T) {
	t.Parallel()
	e := observe.Event{NDenied: 1, Denied: [driver.MaxCharges]driver.Kind{driver.Bytes, driver.Hooks}}
	if got := e.DeniedKinds(); len(got) != 1 || got[0] != driver.Bytes {
		t.Errorf("DeniedKinds = %v, want [bytes]", got)
	}
	for _, n := range []int{-1, driver.MaxCharges + 1} {
		e.NDenied = n
		if got := len(e.DeniedKinds()); got != max(0, min(n, driver.MaxCharges)) {
			t.Errorf("NDenied %d: %d kinds", n, got)
		}
	}
}
