package fault

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore/driver"
)

// TestClassify: every row of CONTRACT §1.3's sorting, once for all
// drivers: outcomes and error replies are answers, refusals and the
// caller's cancellation say nothing of the store, a passed deadline is
// ErrTimeout, anything else ErrUnavailable; and which of them a fallback
// decides locally on (§8).
func TestClassify(t *testing.T) {
	live := context.Background()
	cancelled, cancel := context.WithCancel(live)
	cancel()
	passed, stop := context.WithDeadline(live, time.Now().Add(-time.Second))
	defer stop()
	tests := []struct {
		name      string
		ctx       context.Context
		give      error
		wantClass Class
		wantKind  error
		degrade   bool
	}{
		{"claim lost", live, fmt.Errorf("settle: %w", driver.ErrClaimLost), Answered, nil, false},
		{"already committed", live, driver.ErrAlreadyCommitted, Answered, nil, false},
		{"invalid", live, fmt.Errorf("hit: %w", driver.ErrInvalid), Caller, nil, false},
		{"closed", live, driver.ErrClosed, Caller, nil, false},
		{"over capacity", live, driver.ErrOverCapacity, Caller, nil, false},
		{"error reply", live, driver.ErrorReply(errors.New("ERR busy")), Answered, driver.ErrUnavailable, true},
		{"driver's timeout", live, fmt.Errorf("pool: %w", driver.ErrTimeout), Outage, nil, true},
		{"driver's unavailable", live, fmt.Errorf("dial: %w", driver.ErrUnavailable), Outage, nil, true},
		{"socket deadline", live, fmt.Errorf("read: %w", os.ErrDeadlineExceeded), Outage, driver.ErrTimeout, true},
		{"context deadline", passed, context.DeadlineExceeded, Outage, driver.ErrTimeout, true},
		{"any error past the deadline", passed, io.EOF, Outage, driver.ErrTimeout, true},
		{"a broken connection", live, io.ErrUnexpectedEOF, Outage, driver.ErrUnavailable, true},
		{"cancelled", cancelled, context.Canceled, Caller, nil, false},
		{"cancelled, the driver saw a timeout", cancelled, driver.ErrTimeout, Caller, context.Canceled, false},
		{"cancelled, another error", cancelled, io.EOF, Caller, context.Canceled, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, kind := Classify(tt.ctx, tt.give)
			if c != tt.wantClass || kind != tt.wantKind {
				t.Errorf("Classify(%v) = %v, %v; want %v, %v", tt.give, c, kind, tt.wantClass, tt.wantKind)
			}
			if got := Degradable(c, kind); got != tt.degrade {
				t.Errorf("Degradable = %v, want %v", got, tt.degrade)
			}
		})
	}
}

// TestWrap: a Store's error matches its sentinel and still unwraps to the
// driver's own error; a cancelled call's ErrTimeout is hidden, so that
// errors.Is(err, ErrTimeout) does not report an outage the caller caused
// (CONTRACT T1).
func TestWrap(t *testing.T) {
	type driverErr struct{ error }
	own := driverErr{errors.New("read tcp: i/o timeout")}
	err := Wrap("hit", driver.ErrTimeout, own)
	if !errors.Is(err, driver.ErrTimeout) || !errors.As(err, new(driverErr)) {
		t.Errorf("%v: want ErrTimeout and the driver's error", err)
	}
	if got, want := err.Error(), "fleetstore: hit: timeout: read tcp: i/o timeout"; got != want {
		t.Errorf("message %q, want %q", got, want)
	}
	err = Wrap("commit", context.Canceled, fmt.Errorf("%w: %w", driver.ErrTimeout, own))
	if !errors.Is(err, context.Canceled) || errors.Is(err, driver.ErrTimeout) || !errors.As(err, new(driverErr)) {
		t.Errorf("%v: want context.Canceled, no ErrTimeout, the driver's error", err)
	}
}

// TestBudget: a call gets the Store's budget unless its caller's deadline
// is nearer; a done context fails at once with its error (T1).
func TestBudget(t *testing.T) {
	ctx, cancel, err := Budget(context.Background(), time.Hour, true)
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	if dl, ok := ctx.Deadline(); !ok || time.Until(dl) > time.Hour {
		t.Errorf("deadline %v, %v: want the budget", dl, ok)
	}
	near, stop := context.WithTimeout(context.Background(), time.Minute)
	defer stop()
	if got, _, _ := Budget(near, time.Hour, true); got != near {
		t.Error("a caller's nearer deadline: want its own context, no timer")
	}
	if got, _, _ := Budget(context.Background(), time.Hour, false); got != context.Background() {
		t.Error("needsTimer false: want the context as it is")
	}
	passed, stop2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer stop2()
	if _, _, err := Budget(passed, time.Hour, true); !errors.Is(err, driver.ErrTimeout) {
		t.Errorf("passed deadline: %v, want ErrTimeout", err)
	}
}
