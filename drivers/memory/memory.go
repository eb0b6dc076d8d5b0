// Package memory is the in-process fleetstore driver: the embedded default
// and the reference implementation of CONTRACT.md. The root package
// registers it as the "memory" scheme; no import is needed.
//
//	memory://        a private store, new on every Open
//	memory://NAME    stores opened with the same NAME (and key_prefix) in one
//	                 process share state: fleet nodes in tests. The state
//	                 lives while a Store is open on it and is forgotten
//	                 when the last one closes.
//
// It accepts only the common parameters (timeout, key_prefix, fallback_*;
// no TLS: there is no connection). State is
// sharded by tenant, each shard under its own lock, so one Hit takes one
// lock. Expired buckets, claims and ended quota windows are swept from a
// shard as it is written, so memory stays bounded under a stream of new
// tenants and keys. Each
// Commit or Release settles its own claims under their shards' locks: with
// no round trip to share, calls are not grouped as on Redis and Valkey.
//
// Time is a monotonic clock in µs (CONTRACT G8), injectable with New for
// tests. A quota's charge counts in the window holding it (CONTRACT §3.2).
package memory

import (
	"context"

	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/internal/memstore"
)

// Clock returns the current time in µs. It must never go backwards.
type Clock = memstore.Clock

// Monotonic is the default Clock: wall-clock µs at process start plus the
// monotonic time elapsed since.
func Monotonic() int64 { return memstore.Monotonic() }

// Driver is the memory driver. Register one made by New under a scheme of
// your own to run stores on an injected clock; its zero value opens
// nothing (ErrInvalid).
type Driver struct {
	d *memstore.Driver
}

// Default is the driver the root package registers as "memory".
var Default = New(nil)

// New returns a memory driver reading time from now (nil: Monotonic).
func New(now Clock) *Driver { return &Driver{d: memstore.New(now)} }

var _ driver.Driver = (*Driver)(nil)

// Open implements driver.Driver. The URL's host is the store's NAME; a
// path, a user or any parameter but the common ones is ErrInvalid
// (naming the field). No I/O.
func (d *Driver) Open(cfg driver.Config) (driver.Conn, error) {
	if d == nil || d.d == nil {
		return nil, driver.Invalid("driver", "a memory.Driver made by memory.New, not its zero value")
	}
	return d.d.Open(cfg)
}

// Records returns the live records of tenant, "bucket",
// "window/KIND/START" (a quota's count) and "claim/SOURCE/KEY" with their
// remaining time to live, in every named store (memory://NAME) open with
// keyPrefix. It is conformance.Config.Records for this driver, whose
// random key_prefix names one store (G7, C9, Q5). Records of private
// stores (memory://) are not reachable. It never fails.
func (d *Driver) Records(ctx context.Context, keyPrefix, tenant string) ([]driver.Record, error) {
	if d == nil || d.d == nil {
		return nil, nil // no store was ever opened
	}
	return d.d.Records(ctx, keyPrefix, tenant)
}
