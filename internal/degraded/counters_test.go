package degraded

import (
	"testing"

	"github.com/fleetstore/fleetstore/observe"
)

// TestCountersSnapshot: each counter reaches its own field of
// observe.Stats, and the state passed in is kept as given.
func TestCountersSnapshot(t *testing.T) {
	var c counters
	c.outages.Add(1)
	c.localDecisions.Add(2)
	c.queued.Add(3)
	c.replayed.Add(4)
	c.conflicts.Add(5)
	c.expired.Add(6)
	c.dropped.Add(7)
	c.claimsDropped.Add(8)
	want := observe.Stats{Degraded: true, Outages: 1, LocalDecisions: 2, Outbox: 9, Queued: 3,
		Replayed: 4, Conflicts: 5, Expired: 6, Dropped: 7, ClaimsDropped: 8}
	if got := c.snapshot(true, 9); got != want {
		t.Errorf("snapshot %+v, want %+v", got, want)
	}
	if got := c.snapshot(false, 0); got.Degraded || got.Outbox != 0 {
		t.Errorf("snapshot(false, 0) %+v, want not degraded, an empty outbox", got)
	}
}
