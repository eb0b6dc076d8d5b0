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

// Fallback configures a Store's degraded mode, turned on by WithFallback
// or the URL's fallback_* parameters. While the shared store is out, the
// Store decides from this node's own state at its share of every limit,
// and queues its commits in an outbox to replay when the store is back.
// CONTRACT §8 gives the rules; Store.FallbackStats returns the counters.
//
// Set Nodes or Share, not both. A field left zero takes the URL's value,
// else its default.
type Fallback struct {
	// Nodes is the fleet's size N, 1–1 000 000: this node takes 1/N of
	// every limit (CONTRACT §8.2). URL: fallback_nodes.
	Nodes int
	// Share is this node's fraction of every limit, 0 < Share ≤ 1, rounded
	// down to parts per million (CONTRACT §8.2). URL: fallback_share.
	Share float64
	// OutboxSize is how many commits the outbox holds, ≥ 0; 0 means
	// 250 000 (CONTRACT §8.4). URL: fallback_outbox.
	OutboxSize int
	// OutboxDir is the directory that keeps the outbox on disk across a
	// crash (CONTRACT §8.5), created 0700 if missing; a relative path is
	// the working directory's. Empty keeps it in memory. URL: fallback_outbox_dir.
	OutboxDir string
	// LocalClaims caps the claims the local store holds, ≥ 0; 0 means
	// 500 000 (CONTRACT §8.8). URL: fallback_claims.
	LocalClaims int
	// RecentCommits is how many of this node's commits it remembers, ≥ 0;
	// 0 means 250 000 (CONTRACT §8.6). URL: fallback_recent.
	RecentCommits int
	// OnConflict, if set, is told each conflict (CONTRACT §8.4), from the
	// replay goroutine, one at a time; the replay waits for it to return.
	OnConflict func(Conflict)
	// OnStateChange, if set, is told when the Store goes degraded and when
	// it decides shared again, from the probe goroutine; it must not block.
	OnStateChange func(StateChange)
}

// Defaults of Fallback; bench/README.md gives their memory and disk cost.
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
