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
	return err == memcache.ErrCASConflict || err == memcache.ErrNotStored ||
		err == memcache.ErrCacheMiss
}

// classify names the memcached step that failed and marks what only this
// driver knows; the Store classifies the rest (CONTRACT §1): gomemcache's
// connect timeout, which is not a net.Error, is ErrTimeout; a SERVER_ERROR
// is the server's answer (driver.ErrorReply). ctx is the call's.
func classify(ctx context.Context, op string, err error) error {
	var cte *memcache.ConnectTimeoutError
	switch {
	case errors.Is(err, driver.ErrTimeout), errors.Is(err, driver.ErrUnavailable):
		return err
	case errors.As(err, &cte) && ctx.Err() == nil:
		return fmt.Errorf("memcached: %s: %w: %w", op, driver.ErrTimeout, err)
	case errors.Is(err, memcache.ErrServerError):
		return driver.ErrorReply(fmt.Errorf("memcached: %s: %w", op, err))
	}
	return fmt.Errorf("memcached: %s: %w", op, err)
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
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, net.ErrClosed)
}
