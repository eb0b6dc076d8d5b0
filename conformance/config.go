package conformance

import (
	"context"
	"time"

	"github.com/fleetstore/fleetstore/driver"
)

// Config describes the store under test. Only URL is required.
type Config struct {
	// URL of a live store with its driver registered (blank-import it), e.g.
	// "redis://127.0.0.1:6379/0". Every Store opened on it must share one
	// state (memory://NAME, not memory://). The suite adds a random
	// key_prefix and random tenants, so it never needs an empty store and
	// never flushes it.
	URL string

	// Driver, when set, opens every Store of the suite with
	// fleetstore.OpenDriver instead of the registry: URL's scheme need not
	// be registered (a driver author's test registers nothing).
	Driver driver.Driver

	// AddrURL returns this driver's URL for another address ("host:port").
	// The suite points it at its own silent TCP listener (T1, T4) and at a
	// refused port (T2, T3). Nil: those clauses are skipped with a reason.
	AddrURL func(addr string) string

	// StallURL, when set, is a URL whose store accepts calls and never
	// answers; T1 and T4 use it instead of AddrURL and the silent listener.
	StallURL string

	// Records, when set, lists the records the store keeps for tenant under
	// keyPrefix with their remaining time to live (negative: no expiry). G7
	// and C9 use it to prove that no state outlives its expiry; nil: those
	// checks rely on behaviour alone.
	Records func(ctx context.Context, keyPrefix, tenant string) ([]Record, error)

	// Granularity is the store's expiry granularity: how long past its
	// expiry a record may linger (memcached, whose clock ticks in whole
	// seconds: 2s). Default 1ms.
	Granularity time.Duration

	// Restart, when set, restarts the server on the same address; T5 checks
	// that calls succeed after it without reopening the Store.
	Restart func() error

	// FlushScripts, when set, empties the server's script cache (SCRIPT
	// FLUSH); T5 checks that this is invisible to the caller.
	FlushScripts func() error

	// Stores is how many Stores the concurrency clauses (G4, C10) open on
	// URL. Default 4.
	Stores int
}

// Record is one record a store keeps, for Config.Records: a key of the
// driver's choosing and its remaining time to live (negative: no expiry).
type Record = driver.Record
