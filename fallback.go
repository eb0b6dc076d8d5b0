package fleetstore

import (
	"fmt"
	"math"
	"net/url"
	"strconv"
	"time"

	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/observe"
)

// Fallback configures a Store's degraded mode (CONTRACT §8, WithFallback):
// when the shared store fails a call with ErrTimeout or ErrUnavailable,
// Hits are decided from a node-local store at this node's share of every
// limit, commits are queued in an outbox and replayed when the shared
// store is back, and a background probe decides when that is. Set Nodes
// or Share, not both.
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
	// LocalClaims caps the claims the local store holds, ≥ 0: pending
	// claims of local Hits and committed claims awaiting replay. 0:
	// 500 000, a full outbox's committed claims and 250 000 pending ones
	// (232 bytes each): 30 s of PendingTTL at 8 000 hooks/s. A local Hit
	// that finds it full is decided on its charges alone, with no local
	// claim (observe.Stats.ClaimsDropped). URL: fallback_claims.
	LocalClaims int
	// OnConflict, when set, is called for every replayed commit that met
	// another hook's claim in the shared store (ErrClaimLost): a webhook
	// the outage let in twice, for the application to reconcile. It is
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
	maxFallbackNodes   = 1_000_000
)

// Conflict is a replayed commit that met another hook's claim in the
// shared store (Fallback.OnConflict): the outage admitted two hooks for
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
	// Stats is a snapshot taken at the change.
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

// fallbackParams are the URL parameters of the fallback, common to every
// driver as timeout and key_prefix are; the Store reads and removes them.
var fallbackParams = []string{"fallback_nodes", "fallback_share", "fallback_outbox", "fallback_claims"}

// fallbackFromURL reads the fallback_* parameters off q (removing them):
// nil when there are none.
func fallbackFromURL(q url.Values) (*Fallback, error) {
	var f Fallback
	found := false
	for _, k := range fallbackParams {
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
		if k == "fallback_share" {
			x, err := strconv.ParseFloat(v, 64)
			if err != nil || !(x > 0 && x <= 1) {
				return nil, driver.Invalid("url: "+k, fmt.Sprintf("want a fraction 0 < share ≤ 1 such as 0.25, got %q", v))
			}
			f.Share = x
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			return nil, driver.Invalid("url: "+k, fmt.Sprintf("want an integer, got %q", v))
		}
		switch k {
		case "fallback_nodes":
			if n < 1 {
				return nil, driver.Invalid("url: "+k, fmt.Sprintf("must be 1–%d nodes, got %d", maxFallbackNodes, n))
			}
			f.Nodes = n
		case "fallback_outbox":
			f.OutboxSize = n
		case "fallback_claims":
			f.LocalClaims = n
		}
	}
	if !found {
		return nil, nil
	}
	if err := f.check("url: fallback_", "nodes", "share", "outbox", "claims"); err != nil {
		return nil, err
	}
	return &f, nil // sizes alone may wait for WithFallback to give the share
}

// check validates f's fields, each named prefix+name.
func (f *Fallback) check(prefix, nodes, shareName, outbox, claims string) error {
	switch {
	case f.Nodes < 0 || f.Nodes > maxFallbackNodes:
		return driver.Invalid(prefix+nodes, fmt.Sprintf("must be 1–%d nodes, got %d", maxFallbackNodes, f.Nodes))
	case math.IsNaN(f.Share) || f.Share < 0 || f.Share > 1:
		return driver.Invalid(prefix+shareName, fmt.Sprintf("must be a fraction 0 < share ≤ 1, got %v", f.Share))
	case f.Share > 0 && !validShare(f.Share):
		return driver.Invalid(prefix+shareName, fmt.Sprintf("must be at least 0.000001 (one part per million), got %v", f.Share))
	case f.Nodes != 0 && f.Share != 0:
		return driver.Invalid(prefix+nodes, "give the fleet's size or this node's share, not both")
	case f.OutboxSize < 0:
		return driver.Invalid(prefix+outbox, fmt.Sprintf("must not be negative (0: the default %d), got %d", defaultOutboxSize, f.OutboxSize))
	case f.LocalClaims < 0:
		return driver.Invalid(prefix+claims, fmt.Sprintf("must not be negative (0: the default %d), got %d", defaultLocalClaims, f.LocalClaims))
	}
	return nil
}

// fallbackConfig merges the URL's fallback with WithFallback's (nil, nil:
// no fallback) and checks the result.
func fallbackConfig(fromURL, fromOpt *Fallback) (*Fallback, error) {
	if fromOpt != nil {
		if err := fromOpt.check("fallback.", "nodes", "share", "outbox_size", "local_claims"); err != nil {
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
		f.OnConflict, f.OnStateChange = o.OnConflict, o.OnStateChange
	}
	if f.Nodes == 0 && f.Share == 0 {
		return nil, driver.Invalid("fallback", "set the fleet's size (Fallback.Nodes, fallback_nodes) or this node's share of its limit (Fallback.Share, fallback_share)")
	}
	if f.OutboxSize == 0 {
		f.OutboxSize = defaultOutboxSize
	}
	if f.LocalClaims == 0 {
		f.LocalClaims = defaultLocalClaims
	}
	return &f, nil
}

// share returns f's share of the fleet's limit; f has been checked.
func (f *Fallback) share() share {
	if f.Nodes > 0 {
		return shareOfNodes(f.Nodes)
	}
	s, _ := shareOfFraction(f.Share)
	return s
}
