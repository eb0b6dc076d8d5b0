package degraded

import (
	"sync/atomic"

	"github.com/fleetstore/fleetstore/observe"
)

// counters are the degraded mode's counts over the Store's life
// (observe.Stats, CONTRACT §8). Each is added to from any goroutine;
// a snapshot reads each once, not all at one instant.
type counters struct {
	// localDecisions is written by every local Hit: kept off the cache
	// line of the fields the other calls read.
	_              [64]byte
	localDecisions atomic.Uint64
	_              [56]byte

	outages       atomic.Uint64 // times the breaker opened
	queued        atomic.Uint64 // commits queued, those read back at Open included
	replayed      atomic.Uint64 // queued commits the shared store recorded
	conflicts     atomic.Uint64 // replayed commits that met another hook's committed claim
	expired       atomic.Uint64 // queued commits whose TTL ran out before their replay
	dropped       atomic.Uint64 // commits not queued, or dropped after refusals
	claimsDropped atomic.Uint64 // local Hits decided without a local claim
}

// snapshot is the counters with the state they do not hold: whether
// the breaker is open and how many commits the outbox holds now.
func (c *counters) snapshot(degraded bool, outbox int) observe.Stats {
	return observe.Stats{
		Degraded:       degraded,
		Outages:        c.outages.Load(),
		LocalDecisions: c.localDecisions.Load(),
		Outbox:         outbox,
		Queued:         c.queued.Load(),
		Replayed:       c.replayed.Load(),
		Conflicts:      c.conflicts.Load(),
		Expired:        c.expired.Load(),
		Dropped:        c.dropped.Load(),
		ClaimsDropped:  c.claimsDropped.Load(),
	}
}
