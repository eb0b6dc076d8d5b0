// Package fleetstore is the shared store of a fleet of webhook edge nodes:
// per-tenant GCRA rate limits and a two-phase dedupe claim on the provider's
// event id, decided together in one round trip per incoming hook.
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
//	res, err := store.Hit(ctx, []fleetstore.Charge{hooks.Charge(tenant, 1), body.Charge(tenant, n)}, &claim)
//	left := hooks.Remaining(res.Quota()[0]) // hooks left, rounded down
//
// Package headers writes them as Retry-After and the IETF RateLimit
// fields; package webhook is a whole receiver around a Store.
//
// # Degraded mode
//
// A Store opened with a fallback (WithFallback, or fallback_nodes=N in the
// URL) keeps deciding when its shared store is out (CONTRACT §8):
//
//	store, err := fleetstore.Open("redis://cache:6379/0?timeout=50ms",
//		fleetstore.WithFallback(fleetstore.Fallback{Nodes: 8, OnConflict: reconcile}))
//
// Local decisions. A Hit the shared store fails with ErrTimeout or
// ErrUnavailable — the server refused, did not answer within the budget,
// answered with an error or with nonsense — is decided from a node-local
// memory store, private to the Store, and its Result has Local set. Never
// on ErrInvalid, ErrOverCapacity, a claim outcome, ErrClosed, the
// caller's cancellation or a deadline already passed: those are returned
// as they are. The caller tells an outage from a decision by Result.Local
// (and Stats), not by an error.
//
// This node's share. The local store charges every bucket at this node's
// share s of the fleet's limit: s = 1/Nodes, or Fallback.Share (rounded
// down to parts per million). A charge of emission interval I and
// capacity C is charged locally as
//
//	I' = ceil(I / s)     (whole µs, at most 366 days)
//	C' = max(C, I')
//
// which is the rate times s and the burst C/I times s, never less than
// one charge, so that a single hook still passes. The bound: N nodes whose
// shares add up to at most 1 (N nodes of Nodes: N), all degraded for a
// time t, admit at most what the fleet's limit admits in t — its burst,
// then one charge per emission interval: t/I + C/I charges — plus one
// charge per node for rounding (for charges of different costs, such as
// bytes: the sum of their increments is at most t + C plus N times the
// largest). Each node's bucket admits at most (t + C')/I' ≤ s·(t + C)/I + 1
// charges. The local buckets start full at the outage (they do not know
// the shared ones), so a fleet whose shared buckets were drained admits
// up to one burst more during an outage than it would have shared.
// TestFallbackBound proves it for fleets of 1–8 nodes.
//
// A breaker. The first call that meets an outage spends its budget and
// opens the breaker; from then on Hits and Commits go local at once (a
// memory Hit's cost: BenchmarkHitDegraded) without touching the shared
// store. One goroutine probes it with Ping within the budget, waiting 25ms
// doubling up to 1s between probes (each wait drawn from [b/2, b]); no
// call waits for it. When a probe is answered, the outbox is replayed, and
// then the breaker closes: calls go shared again, so that a provider's
// retry of a hook committed during the outage meets that commit. An
// outage that begins within 5s of the last one's end continues its
// backoff: a flapping store is probed (and logged) about once a second.
//
// The outbox. A Commit that cannot reach the shared store — the breaker
// is open, or the Commit itself failed for an outage, whether the claim was
// taken locally or on the shared store before it went away — is committed
// in the local store (a retry at this node is a Duplicate) and queued, and
// the Commit returns nil. The replay commits the queue in batches of up to
// 256 (halved while a batch outlasts the budget part way, as memcached's
// claim-by-claim settle can), each claim's TTL less the time it waited, so that it expires when the
// Commit meant it to (one whose TTL ran out in the queue is not sent:
// Stats.Expired). Committing an absent claim records it (CONTRACT C7), so
// after the replay a retry at any node is a Duplicate. A replayed commit
// that meets another hook's claim (ErrClaimLost) is a webhook the outage
// let in twice: it is counted (Stats.Conflicts), logged once with the
// claim's identity (tenant, source_id, key, hook_id, holder, node; no
// body: the Store never sees one; the first 100 of an outage, the rest
// counted) and handed to Fallback.OnConflict for the application to
// reconcile. A commit the shared store refuses with an error reply 8 times
// is dropped (counted, logged), so that it cannot keep the node degraded.
// The outbox holds Fallback.OutboxSize commits (DefaultOutboxSize); a
// commit that finds it full is not queued and not committed locally, is
// counted (Stats.Dropped, logged once an outage), and its Commit fails
// with the outage's error: a call never blocks on it. The outbox lives in
// the process: Close makes one last replay within one budget, and logs the
// number of commits it could not replay; those claims expire by their
// PendingTTL.
//
// Release during an outage releases the claim in the local store only; a
// claim pending in the shared store expires by its PendingTTL (a retry
// meanwhile is Pending at the nodes that decide shared). Reset forgets the
// tenant's local buckets too, and while the breaker is open it returns
// ErrUnavailable at once without trying the shared store. Ping always asks
// the shared store; one that fails for an outage opens the breaker.
//
// Memory. The local store keeps only what an outage needs: the claims
// decided locally (pending until their PendingTTL, swept as the memory
// driver sweeps) and the claims committed locally while queued; a replayed
// commit is forgotten there once the breaker has closed. Fallback.
// LocalClaims (DefaultLocalClaims) caps the claims it holds, counted every
// few local decisions: a local Hit past the cap is decided on its charges
// alone, without a local claim (Stats.ClaimsDropped). The local buckets,
// one record per tenant, expire as the memory driver's do.
//
// Visible state. One warning when the Store goes degraded (with the cause)
// and one info line when it decides shared again (with the outage's
// figures: local decisions, queued, replayed, conflicts, dropped), through
// WithLogger; never one per call. The Store's own "unreachable" and
// "reachable again" lines are replaced by these. Fallback.OnStateChange is
// told both, in order, from the probe goroutine. Store.Stats returns the
// counters.
//
// # Metrics and traces
//
// WithObserver hands every call's Event to an Observer (CONTRACT §1.5):
// its op, duration, outcome, the kinds that denied it, its error's class
// (ClassOf), its claims and whether the degraded mode decided it locally;
// never a tenant, key or hook id. A StoreObserver is also given the
// Store's Stats at Open. Package fleetotel, a module of its own
// (github.com/fleetstore/fleetstore/fleetotel), implements it with
// OpenTelemetry metrics and spans:
//
//	obs, err := fleetotel.New() // the global meter and tracer providers
//	store, err := fleetstore.Open(url, fleetstore.WithObserver(obs))
package fleetstore
