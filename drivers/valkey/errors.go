package valkey

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/valkey-io/valkey-go"

	"github.com/fleetstore/fleetstore/driver"
)

// failed classifies err, a call's failure, for the Store: ErrTimeout when
// the budget ran out, the caller's cancellation as is, ErrUnavailable for
// everything else (refused, unreachable, closed, an error reply). Errors
// the lazy client already classified pass through. When the server did not
// answer at all, the first such failure of an outage is logged.
func (c *conn) failed(ctx context.Context, err error) error {
	var reply *valkey.ValkeyError
	answered := errors.As(err, &reply)
	switch {
	case errors.Is(err, driver.ErrTimeout) || errors.Is(err, driver.ErrUnavailable) || errors.Is(err, driver.ErrClosed):
	case errors.Is(err, context.Canceled) && ctx.Err() == context.Canceled:
		return err // the caller gave up: says nothing about the store
	case !answered && (isTimeout(err) || errors.Is(ctx.Err(), context.DeadlineExceeded)):
		err = fmt.Errorf("%w: %w", driver.ErrTimeout, err)
	default:
		err = fmt.Errorf("%w: %w", driver.ErrUnavailable, err)
	}
	if answered {
		c.answered()
	} else {
		c.reach.Down(err)
	}
	return err
}

// answered records that the server answered.
func (c *conn) answered() { c.reach.Up() }

// isTimeout reports a deadline that passed: the context's, a socket's, or
// a dial's.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) ||
		errors.As(err, &ne) && ne.Timeout()
}

// contextErr is the error of a call whose context ended while it waited.
func contextErr(ctx context.Context) error {
	err := ctx.Err()
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: %w", driver.ErrTimeout, err)
	}
	return err
}
