// Package fleetstore is the shared store of a fleet of webhook edge nodes:
// per-tenant GCRA rate limits, calendar quotas, and a two-phase dedupe
// claim on the provider's event id. A hook is two calls: Hit charges the limits and claims the
// event id in one round trip, then Commit (stored) or Release (not
// stored) settles the claim.
//
// It works like database/sql: drivers register a URL scheme, users
// blank-import the driver they want and pick a store by URL.
//
//	import (
//		"github.com/fleetstore/fleetstore"
//		_ "github.com/fleetstore/fleetstore/drivers/redis"
//	)
//
//	store, err := fleetstore.Open("redis://cache:6379/0?timeout=50ms")
//
// The in-process memory driver (memory://, memory://NAME) is built in.
// The behaviour every driver keeps is CONTRACT.md; the conformance package
// proves it.
//
// # Limits and quota
//
// A Limit is a rate in the caller's units, built once at start-up; per
// hook it yields the Charge of a cost, and every Result reports each
// charged bucket's state after the decision (Result.Quota, CONTRACT G10),
// which the Limit turns back into units:
//
//	hooks := fleetstore.MustLimit(fleetstore.PerSecond(fleetstore.Hooks, 100, 200))
//	body := fleetstore.MustLimit(fleetstore.NewByteLimit(fleetstore.Bytes, 1<<20, 8<<20))
//	charges := []fleetstore.Charge{hooks.Charge(tenant, 1), body.Charge(tenant, n)}
//	res, err := store.Hit(ctx, charges, &claim)
//	left := hooks.Remaining(res.Quota()[0]) // hooks left, rounded down
//
// Store.Peek(ctx, tenant, hooks, body) reads the same states without
// charging or writing anything (CONTRACT G11), for a dashboard or an API
// answer. Package headers writes them as Retry-After and the IETF RateLimit
// fields; package webhook is a whole receiver around a Store.
//
// A calendar quota, "10 000 hooks a month" in a time zone, is a Limit too
// (NewQuota, NewByteQuota), charged in the same Hit as the rate limits, all
// or nothing (CONTRACT §3.2). Its state in Result.Quota holds the window's
// count, Used; the Limit turns it into the units left and the instant the
// count starts over:
//
//	month := fleetstore.MustLimit(fleetstore.NewQuota("hooks_month", 10_000, calendar.Month, berlin))
//	res, err := store.Hit(ctx, fleetstore.Plan{hooks, month}.Charges(nil, tenant, n), &claim)
//	b := res.Quota()[1]
//	left, resets := month.Remaining(b), month.Resets(b, time.Now())
//
// # Degraded mode
//
// A Store opened with a fallback (WithFallback, or fallback_nodes=N in the
// URL) keeps deciding when its shared store is out (CONTRACT §8):
//
//	store, err := fleetstore.Open("redis://cache:6379/0?timeout=50ms",
//		fleetstore.WithFallback(fleetstore.Fallback{Nodes: 8, OnConflict: reconcile}))
//
// A Hit the shared store fails with ErrTimeout or ErrUnavailable is
// decided from a node-local memory store at this node's share of every
// limit, and its Result has Local set; a Commit is committed locally and
// queued, to be replayed when a background probe finds the shared store
// back. CONTRACT §8 gives the rules: the share and its bound, the breaker,
// the outbox, Release and Reset, memory and logging. Store.FallbackStats
// returns the counters.
//
// # Metrics and traces
//
// WithObserver hands every call's observe.Event to an observe.Observer
// (package observe, CONTRACT §1.5): its op, duration, outcome, the kinds
// that denied it, its error's class, its claims and whether the degraded
// mode decided it locally; never a tenant, key or hook id. Package
// fleetotel, a module of its own
// (github.com/fleetstore/fleetstore/fleetotel), implements it with
// OpenTelemetry metrics and spans:
//
//	obs, err := fleetotel.New() // the global meter and tracer providers
//	store, err := fleetstore.Open(url, fleetstore.WithObserver(obs))
package fleetstore
