package conformance

import (
	"context"
	"time"

	"github.com/fleetstore/fleetstore/driver"
)

// Config describes the store under test. Only URL is required.
type Config struct {
	// URL of a live store, e.g. "redis://127.0.0.1:6379/0". Every Store
	// opened on it must share one state (memory://NAME, not memory://).
	// The suite adds a random key_prefix and random tenants, so it never
	// needs an empty store and never flushes it.
	URL string

	// Driver, when set, opens every Store of the suite with
	// fleetstore.OpenDriver instead of the registry: URL's scheme need not
	// be registered (a driver author's test registers nothing). Nil: the
	// driver registered for URL's scheme (blank-import it).
	Driver driver.Driver

	// AddrURL returns this driver's URL for another address ("host:port").
	// The suite points it at its own silent TCP listener (T1, T4), at a
	// refused port (T2, T3), at a proxy (T3, T5) and at servers that answer
	// nonsense (V4). Nil: when URL's host is a host:port (or a list of
	// them), URL with its host, and every addr= parameter, replaced by the
	// address; otherwise those clauses, or those parts of them, are skipped
	// with the reason.
	AddrURL func(addr string) string

	// StallURL, when set, is a URL whose store accepts calls and never
	// answers; T1 and T4 use it instead of AddrURL and the silent listener.
	StallURL string

	// Records, when set, lists the records the store keeps for tenant under
	// keyPrefix with their remaining time to live (negative: no expiry). G7,
	// C9 and Q5 use it to prove that no state outlives its expiry; nil: G7
	// and C9 rely on behaviour alone, and Q5 is skipped.
	Records func(ctx context.Context, keyPrefix, tenant string) ([]Record, error)

	// Granularity overrides the store's expiry granularity: how long past
	// its expiry a record may linger (G7, C9, Q5). Zero: what the driver
	// declares (driver.ExpiryGranularity, e.g. memcached's 2s), else 1ms.
	Granularity time.Duration

	// Clock, when set, is the clock of every Store the suite opens (the
	// memory driver's memory.New(clock), or a server whose time the test
	// controls). The clauses then read the store's time from it and move
	// it instead of sleeping, one clause after another, since a move is
	// seen by all; T1–T5 keep to real time, as budgets do. Nil: the wall
	// clock, and the clauses that sleep run at once.
	Clock Clock

	// Restart, when set, restarts the server on the same address; T5 checks
	// that calls succeed after it without reopening the Store.
	Restart func() error

	// FlushScripts, when set, empties the server's script cache and its
	// function libraries (SCRIPT FLUSH, FUNCTION FLUSH); T5 checks that
	// this is invisible to the caller.
	FlushScripts func() error

	// Stores is how many Stores the concurrency clauses (G4, C10) open on
	// URL. Default 4.
	Stores int

	// Omit names clauses not to run, each with the reason, reported as
	// SKIP with it: for a Store whose contract differs from a driver's on
	// purpose (a Store with a fallback decides locally where T1, T2 and
	// V4 expect errors, CONTRACT §8). A driver author omits nothing.
	Omit map[string]string

	// ClauseTimeout is how long one clause may run before the suite stops
	// waiting for it and reports it FAIL, naming it, with the stacks of
	// the suite's goroutines (a driver call that ignores its context's
	// deadline would otherwise hang the whole run). Zero:
	// DefaultClauseTimeout.
	ClauseTimeout time.Duration

	// Serial runs every clause one after another instead of the clauses
	// that only sleep at once: for a store whose Stores are costly to open
	// and first call (TLS to every node of a cluster), where the clauses
	// opening Stores all at once would delay each other's calls past the
	// intervals they measure. Slower (the sleeps add up), never weaker.
	Serial bool
}

// Record is one record a store keeps, for Config.Records: a key of the
// driver's choosing and its remaining time to live (negative: no expiry).
type Record = driver.Record

// Clock is a store's time as the suite reads and moves it (Config.Clock).
// Its methods are called from several goroutines.
type Clock interface {
	// Now returns the store's time: the time its expiries and buckets
	// are reckoned by.
	Now() time.Time
	// Sleep returns once the store's time has moved on by at least d (d ≤
	// 0: at once). A clock that the test drives moves itself by d and
	// returns.
	Sleep(d time.Duration)
}

// wallClock is the time of a store that reads its own clock.
type wallClock struct{}

func (wallClock) Now() time.Time        { return time.Now() }
func (wallClock) Sleep(d time.Duration) { time.Sleep(d) }
