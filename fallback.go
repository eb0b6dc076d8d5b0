package fleetstore

import (
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/internal/degraded"
	"github.com/fleetstore/fleetstore/internal/memstore"
	"github.com/fleetstore/fleetstore/internal/urlparam"
	"github.com/fleetstore/fleetstore/observe"
)

// Fallback configures a Store's degraded mode (CONTRACT §8, WithFallback):
// when the shared store fails a call with ErrTimeout or ErrUnavailable,
// Hits are decided from a node-local store at this node's share of every
// limit, commits are queued in an outbox and replayed when the shared
// store is back, and a background probe decides when that is. Set Nodes
// or Share, not both.
//
// Local decisions. A Hit the shared store fails with ErrTimeout or
// ErrUnavailable (the server refused, did not answer within the budget,
// answered with an error or with nonsense) is decided from a node-local
// memory store, private to the Store, and its Result has Local set. Never
// on ErrInvalid, ErrOverCapacity, a claim outcome, ErrClosed, the caller's
// cancellation or a deadline already passed: those are returned as they
// are. The caller tells an outage from a decision by Result.Local (and
// Store.FallbackStats), not by an error.
//
// This node's share. The local store charges every bucket at this node's
// share s of the fleet's limit: s = 1/Nodes, or Share (rounded down to
// parts per million). A charge of emission interval I and capacity C is
// charged locally as
//
//	I' = ceil(I / s)     (whole µs, at most 366 days)
//	C' = max(C, I')
//
// which is the rate times s and the burst C/I times s, never less than one
// charge, so that a single hook still passes. The bound: N nodes whose
// shares add up to at most 1, all degraded for a time t, admit at most
// what the fleet's limit admits in t (its burst, then one charge per
// emission interval: t/I + C/I charges) plus one charge per node for
// rounding (for charges of unequal cost, such as bytes: the sum of their
// increments is at most t + C plus N times the largest); TestFallbackBound
// proves it for fleets of 1–8 nodes. Across the outage's edges a fleet
// admits more than its limit: the local buckets start full at the outage,
// and the shared ones refill while no node charges them. Over a window W
// with no shared decision for u, each node i deciding locally over t_i, it
// admits at most (W − u + min(u, C) + C)/I + 1 shared plus, for each node,
// (t_i + C')/I' + 1 locally: with every t_i = u, the limit's (W + C)/I plus
// one burst plus min(C, u)/I (another burst once u ≥ C) plus one per node.
// TestFallbackBoundAcrossOutage shows it reached; the fault suite checks it
// on a fleet of real servers.
//
// The breaker. The first call that meets an outage spends its budget and
// opens the breaker; from then on Hits and Commits go local at once
// (BenchmarkHitDegraded) without touching the shared store. One goroutine
// probes it with Ping within the budget, waiting 25ms doubling up to 1s
// between probes (each wait drawn from [b/2, b]); no call waits for it.
// When a probe is answered, the outbox is replayed, and then the breaker
// closes: calls go shared again, so that a provider's retry of a hook
// committed during the outage meets that commit. An outage that begins
// within 5s of the last one's end continues its backoff.
//
// The outbox. A Commit that cannot reach the shared store (the breaker is
// open, or the Commit itself failed for an outage) is committed in the
// local store (a retry at this node is a Duplicate) and queued, and the
// Commit returns nil. The replay commits the queue in batches of up to
// 256, each claim's TTL less the time it waited (one whose TTL ran out in
// the queue is not sent: Stats.Expired). Committing an absent claim
// records it (CONTRACT C7), so after the replay a retry at any node is a
// Duplicate. A replayed commit that meets another hook's committed claim
// is a webhook the outage let in twice: it is counted (Stats.Conflicts),
// handed to OnConflict and logged with the claim's identity (never a
// body): 10 lines, then one a minute at most over the Store's life, each
// saying how many were not logged. One that meets another hook's pending
// claim (the Commit's ErrClaimLost, then a Hit of the claim alone that is
// Pending) is no conflict yet: that hook may be released, or its node die
// and its claim expire. The commit waits in the outbox (the breaker closes
// without it) and is replayed again when the claim's pending time is up,
// 25ms to 1s later, until the claim is committed (a conflict), released
// or expired: then a Hit of the claim alone under the commit's hook_id
// takes it (C1) and a Commit within the same budget commits it (C5). A
// commit the shared store refuses with an error reply 8 times is dropped.
// A commit that finds the outbox full (OutboxSize) is not queued and not
// committed locally, is counted (Stats.Dropped), and its Commit fails with
// the outage's error: a call never blocks on it. Close makes one last
// replay within one budget and logs the number of commits it could not
// replay. Without OutboxDir the outbox lives in the process: those claims,
// and all queued at a crash, expire by their PendingTTL; with it they are
// replayed at the next Open.
//
// Release during an outage releases the claim in the local store only; a
// claim pending in the shared store expires by its PendingTTL. Reset
// forgets the tenant's local buckets too, and while the breaker is open
// returns ErrUnavailable at once. Ping always asks the shared store; one
// that fails for an outage opens the breaker.
//
// Memory. The local store keeps the claims decided locally (pending until
// their PendingTTL) and those committed locally while queued (forgotten
// once replayed and the breaker closed), at most about LocalClaims, and
// until their TTL the commits of RecentCommits that a Hit met while
// degraded. The local buckets, one record per tenant, expire as the memory
// driver's do.
//
// Visible state. One warning when the Store goes degraded (with the cause)
// and one info line when it decides shared again (with the outage's
// figures), through WithLogger, never one per call; they replace the
// Store's own "unreachable" and "reachable again" lines. OnStateChange is
// told both, in order; Store.FallbackStats returns the counters (observe.Stats).
type Fallback struct {
	// Nodes is the fleet's size N, 1–1 000 000: while degraded this node
	// charges every bucket at 1/N of its rate and 1/N of its burst, never
	// less than one charge. URL: fallback_nodes.
	Nodes int
	// Share is this node's fraction of the fleet's limit, 0 < Share ≤ 1,
	// for a fleet whose nodes take unequal shares. It is rounded down to
	// parts per million (Nodes gives 1/N exactly). URL: fallback_share.
	Share float64
	// OutboxSize is how many commits the outbox holds for replay, ≥ 0.
	// 0: 250 000, 25 s of commits at 10 000 hooks/s a node, about 90 MB
	// when full (360 bytes a queued commit, its local claim included:
	// BenchmarkDegradedMemory). A commit that finds it full is not queued
	// (observe.Stats.Dropped) and its Commit returns the outage's error. URL:
	// fallback_outbox.
	OutboxSize int
	// OutboxDir, when set, keeps the outbox on disk too, in this directory
	// (created 0700 if missing; a relative path is the process's working
	// directory's), so that commits queued survive Close and
	// a crash (kill -9): a Commit queued returns nil only once its record
	// is fsynced (commits arriving meanwhile share one fsync), and the next
	// Open of a Store on the directory queues what was not replayed, with
	// its TTL counted on by the wall clock, committed locally, and decides
	// from this node until it is replayed (OutboxSize oldest kept, the rest
	// Dropped). A torn or corrupt tail is cut at Open with one log line; a
	// file named as a segment that is none fails Open. One Store at a
	// time, in any process, holds the directory: another's Open fails
	// naming it. After the disk fails a write (full, gone) the directory
	// is given up: that Commit and every one queued later until the Store
	// is opened again fails with the disk's error (ErrUnavailable, logged
	// once), rather than be queued where a crash would lose it. Cost per queued commit
	// (BenchmarkDegradedAccept): ~50 bytes of heap more, a record of its
	// claim's strings plus ~30 bytes on disk (113 for UUID-sized ids); the
	// directory holds at most 2 × the waiting records' bytes + 12 MiB
	// (~70 MB for a full default outbox). A Commit queued takes an fsync
	// (~0.4ms alone; 8 callers sharing: ~85µs each). Empty: memory only.
	// URL: fallback_outbox_dir.
	OutboxDir string
	// LocalClaims caps the claims the local store holds, ≥ 0: pending
	// claims of local Hits and committed claims awaiting replay. 0:
	// 500 000, a full outbox's committed claims and 250 000 pending ones
	// (232 bytes each): 30 s of PendingTTL at 8 000 hooks/s. A local Hit
	// that finds it full is decided on its charges alone, with no local
	// claim (observe.Stats.ClaimsDropped). URL: fallback_claims.
	LocalClaims int
	// RecentCommits is how many of this node's recent commits it keeps, ≥ 0:
	// every claim the shared store committed for it (a Commit or a replay)
	// or answered a Hit of it Duplicate (kept for that Hit's TTL), by a
	// 16-byte digest of tenant, source_id and key, with its committer and
	// TTL; the oldest is forgotten first. While degraded, a Hit on one
	// still within its TTL is a Duplicate naming the committer (after its
	// charges, as C4), so that a provider's retry reaching a node that
	// stored the hook, or was told of it, is not admitted again through an
	// outage. 0: 250 000,
	// 25 s of commits at 10 000 hooks/s a node (4 min at 1 000), about 30 MB
	// when full: 122 bytes a commit with a 26-byte hook_id, against 232 for
	// a claim in a memory store (internal/degraded's BenchmarkRecentCommits).
	// URL: fallback_recent.
	RecentCommits int
	// OnConflict, when set, is called for every replayed commit that met
	// another hook's committed claim in the shared store (one pending is
	// waited for): a webhook the outage let in twice, for the application
	// to reconcile. It is
	// called from the replay goroutine, one conflict at a time; it must
	// not block for long (replay waits for it).
	OnConflict func(Conflict)
	// OnStateChange, when set, is called when the Store goes degraded and
	// when it decides shared again, in that order, from the probe
	// goroutine (never from a caller's call). It must not block for long.
	OnStateChange func(StateChange)
}

// Defaults of Fallback (its fields' docs give the figures).
const (
	defaultOutboxSize  = 250_000
	defaultLocalClaims = 500_000
	defaultRecent      = 250_000
	maxFallbackNodes   = 1_000_000
	maxOutboxDir       = 4096 // bytes: PATH_MAX
)

// Conflict is a replayed commit that met another hook's committed claim in
// the shared store (Fallback.OnConflict): the outage admitted two hooks for
// one provider event, Claim's and Holder's.
type Conflict struct {
	Claim    Claim     // the commit as it was queued (its full TTL)
	Holder   string    // the hook_id the shared store holds the key for
	QueuedAt time.Time // when Commit queued it in the outbox
}

// StateChange is what Fallback.OnStateChange is told.
type StateChange struct {
	// Degraded is true when the Store starts deciding from this node's
	// state, false when it decides shared again (its outbox replayed).
	Degraded bool
	// Cause is the shared store's error that started the outage
	// (Degraded only).
	Cause error
	// Stats is a snapshot taken when OnStateChange is called, from the
	// probe goroutine: calls made since the change are counted in it.
	Stats observe.Stats
}

// WithFallback turns on the Store's degraded mode (CONTRACT §8) with f.
// Fields left zero keep the URL's fallback_* parameters, or the defaults:
// a fallback_nodes=8 in the URL and WithFallback(Fallback{OnConflict: …})
// in the code make one configuration. A Nodes or Share set here replaces
// both of the URL's. Open returns ErrInvalid naming the field
// (fallback.nodes, fallback.share, …) for a value out of range, and for a
// fallback with neither Nodes nor Share.
func WithFallback(f Fallback) Option {
	return func(o *options) { o.fallback = &f }
}

// fallbackFromURL reads the fallback_* parameters off q (removing them):
// nil when there are none.
func fallbackFromURL(q url.Values) (*Fallback, error) {
	var f Fallback
	found := false
	for _, k := range urlparam.Fallback {
		vs, ok := q[k]
		if !ok {
			continue
		}
		found = true
		if len(vs) > 1 {
			return nil, driver.Invalid("url: "+k, fmt.Sprintf("given %d times", len(vs)))
		}
		v := vs[0]
		q.Del(k)
		if k == urlparam.FallbackOutboxDir {
			if v == "" {
				return nil, driver.Invalid("url: "+k, "want a directory path, got none")
			}
			f.OutboxDir = v
			continue
		}
		if k == urlparam.FallbackShare {
			x, err := strconv.ParseFloat(v, 64)
			if err != nil || !(x > 0 && x <= 1) {
				return nil, driver.Invalid("url: "+k,
					fmt.Sprintf("want a fraction 0 < share ≤ 1 such as 0.25, got %q", v))
			}
			f.Share = x
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			return nil, driver.Invalid("url: "+k, fmt.Sprintf("want an integer, got %q", v))
		}
		switch k {
		case urlparam.FallbackNodes:
			if n < 1 {
				return nil, driver.Invalid("url: "+k,
					fmt.Sprintf("must be 1–%d nodes, got %d", maxFallbackNodes, n))
			}
			f.Nodes = n
		case urlparam.FallbackOutbox:
			f.OutboxSize = n
		case urlparam.FallbackClaims:
			f.LocalClaims = n
		case urlparam.FallbackRecent:
			f.RecentCommits = n
		}
	}
	if !found {
		return nil, nil
	}
	err := f.check("url: ", urlparam.Fallback...)
	if err != nil {
		return nil, err
	}
	return &f, nil // sizes alone may wait for WithFallback to give the share
}

// check validates f's fields, each named prefix+its name in names:
// nodes, share, outbox size, local claims, recent commits, outbox dir.
func (f *Fallback) check(prefix string, names ...string) error {
	nodes, shareName, outbox, claims, recent, dir := names[0], names[1], names[2], names[3],
		names[4], names[5]
	switch {
	case f.Nodes < 0 || f.Nodes > maxFallbackNodes:
		return driver.Invalid(prefix+nodes,
			fmt.Sprintf("must be 1–%d nodes, got %d", maxFallbackNodes, f.Nodes))
	case math.IsNaN(f.Share) || f.Share < 0 || f.Share > 1:
		return driver.Invalid(prefix+shareName,
			fmt.Sprintf("must be a fraction 0 < share ≤ 1, got %v", f.Share))
	case f.Share > 0 && !validShare(f.Share):
		return driver.Invalid(prefix+shareName,
			fmt.Sprintf("must be at least 0.000001 (one part per million), got %v", f.Share))
	case f.Nodes != 0 && f.Share != 0:
		return driver.Invalid(prefix+nodes, "give the fleet's size or this node's share, not both")
	case f.OutboxSize < 0:
		return driver.Invalid(prefix+outbox, fmt.Sprintf(
			"must not be negative (0: the default %d), got %d", defaultOutboxSize, f.OutboxSize))
	case f.LocalClaims < 0:
		return driver.Invalid(prefix+claims, fmt.Sprintf(
			"must not be negative (0: the default %d), got %d", defaultLocalClaims, f.LocalClaims))
	case f.RecentCommits < 0:
		return driver.Invalid(prefix+recent, fmt.Sprintf(
			"must not be negative (0: the default %d), got %d", defaultRecent, f.RecentCommits))
	case strings.ContainsRune(f.OutboxDir, 0):
		return driver.Invalid(prefix+dir, "must not hold a NUL byte")
	case len(f.OutboxDir) > maxOutboxDir:
		return driver.Invalid(prefix+dir, fmt.Sprintf("must be at most %d bytes, got %d",
			maxOutboxDir, len(f.OutboxDir)))
	}
	return nil
}

// fallbackConfig merges the URL's fallback with WithFallback's (nil, nil:
// no fallback) and checks the result.
func fallbackConfig(fromURL, fromOpt *Fallback) (*Fallback, error) {
	if fromOpt != nil {
		err := fromOpt.check("fallback.", "nodes", "share", "outbox_size", "local_claims",
			"recent_commits", "outbox_dir")
		if err != nil {
			return nil, err
		}
	}
	if fromURL == nil && fromOpt == nil {
		return nil, nil
	}
	var f Fallback
	if fromURL != nil {
		f = *fromURL
	}
	if o := fromOpt; o != nil {
		if o.Nodes != 0 || o.Share != 0 {
			f.Nodes, f.Share = o.Nodes, o.Share
		}
		if o.OutboxSize != 0 {
			f.OutboxSize = o.OutboxSize
		}
		if o.LocalClaims != 0 {
			f.LocalClaims = o.LocalClaims
		}
		if o.RecentCommits != 0 {
			f.RecentCommits = o.RecentCommits
		}
		if o.OutboxDir != "" {
			f.OutboxDir = o.OutboxDir
		}
		f.OnConflict, f.OnStateChange = o.OnConflict, o.OnStateChange
	}
	if f.Nodes == 0 && f.Share == 0 {
		return nil, driver.Invalid("fallback", "set the fleet's size (Fallback.Nodes, "+
			urlparam.FallbackNodes+") or this node's share of its limit (Fallback.Share, "+
			urlparam.FallbackShare+")")
	}
	if f.OutboxSize == 0 {
		f.OutboxSize = defaultOutboxSize
	}
	if f.LocalClaims == 0 {
		f.LocalClaims = defaultLocalClaims
	}
	if f.RecentCommits == 0 {
		f.RecentCommits = defaultRecent
	}
	return &f, nil
}

// share returns f's share of the fleet's limit; f has been checked.
func (f *Fallback) share() degraded.Share {
	if f.Nodes > 0 {
		return degraded.OfNodes(f.Nodes)
	}
	s, _ := degraded.OfFraction(f.Share)
	return s
}

func validShare(f float64) bool {
	_, ok := degraded.OfFraction(f)
	return ok
}

// fallback is the degraded mode's decorator of the Store's conn
// (internal/degraded), as the Store holds it: it settles claims locally
// too, and counts (Store.FallbackStats).
type fallback interface {
	conn
	localSettler
	Stats() observe.Stats
}

// degrade puts the degraded mode of f around the Store's conn (Open, before
// any call).
func (s *Store) degrade(f *Fallback, clock memstore.Clock) error {
	rules := degraded.Rules{Share: f.share(), Nodes: f.Nodes, OutboxSize: f.OutboxSize,
		LocalClaims: f.LocalClaims, RecentCommits: f.RecentCommits, OutboxDir: f.OutboxDir,
		Logger: s.log, Scheme: s.scheme, URL: s.display, Timeout: s.timeout, Clock: clock,
		Now: func() time.Time { return s.now() }}
	if on := f.OnConflict; on != nil {
		rules.OnConflict = func(c Claim, holder string, at time.Time) {
			on(Conflict{Claim: c, Holder: holder, QueuedAt: at})
		}
	}
	if on := f.OnStateChange; on != nil {
		rules.OnStateChange = func(degraded bool, cause error, st observe.Stats) {
			on(StateChange{Degraded: degraded, Cause: cause, Stats: st})
		}
	}
	if s.obs != nil {
		rules.Observe = s.obs.Observe
	}
	fb, err := degraded.New(s.conn, rules)
	if err != nil {
		return err
	}
	s.use(fb)
	return nil
}
