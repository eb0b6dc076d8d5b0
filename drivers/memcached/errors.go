package memcached

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"

	"github.com/bradfitz/gomemcache/memcache"

	"github.com/fleetstore/fleetstore/driver"
)

// conflict reports whether err is a write that memcached refused because
// its condition failed: the item changed (EXISTS), appeared (NOT_STORED
// for add) or vanished (NOT_FOUND for cas). Such a write had no effect, so
// the driver may read again and retry.
func conflict(err error) bool {
	return err == memcache.ErrCASConflict || err == memcache.ErrNotStored || err == memcache.ErrCacheMiss
}

// classify turns a gomemcache error into one matching a driver sentinel:
// the caller's cancellation as is, ErrTimeout when the deadline passed or a
// socket timed out, ErrUnavailable otherwise (refused, reset, no servers,
// a server error or an unexpected reply).
func classify(ctx context.Context, op string, err error) error {
	if errors.Is(err, driver.ErrTimeout) || errors.Is(err, driver.ErrUnavailable) {
		return err
	}
	var ne net.Error
	var cte *memcache.ConnectTimeoutError
	switch {
	case errors.Is(ctx.Err(), context.Canceled):
		return fmt.Errorf("memcached: %s: %w", op, ctx.Err())
	case ctx.Err() != nil, errors.As(err, &cte), errors.As(err, &ne) && ne.Timeout():
		return fmt.Errorf("memcached: %s: %w: %w", op, driver.ErrTimeout, err)
	}
	return fmt.Errorf("memcached: %s: %w: %w", op, driver.ErrUnavailable, err)
}

// readAgain runs read, and once more when it failed on a connection the
// server had closed (a restart, an idle timeout): the pooled socket was
// dead before the call. Only reads and deletes go through it; a write whose
// reply is lost is never re-sent (T5).
func readAgain(ctx context.Context, read func() error) error {
	err := read()
	if err != nil && ctx.Err() == nil && brokenConn(err) {
		err = read()
	}
	return err
}

func brokenConn(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, net.ErrClosed)
}
