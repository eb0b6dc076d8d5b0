package fleetstore_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/drivers/memory"
)

// TestFallbackBoundAcrossOutage: the bound of CONTRACT §8 across an
// outage's edges, and that it is reached. A fleet whose every node asks
// for all it can get, on one clock for the shared and the local stores:
// healthy for 1s, out for t, healthy again for 2s. Over that window W the
// fleet admits at most the limit's (W + C)/I, plus a burst B (the local
// buckets start full), plus min(B, t/I) (the shared bucket refilled while
// no node charged it), plus one per node (the share's rounding) and one
// (the shared bucket's); and no fewer than that less 3 per node and 4
// (the steps of the test's clock end each phase a little early).
func TestFallbackBoundAcrossOutage(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		nodes       int
		rate, burst int64
		outage      time.Duration
	}{
		{3, 100, 30, 3 * time.Second},        // t ≥ C: two bursts more than the limit
		{3, 100, 30, 100 * time.Millisecond}, // t < C: the shared bucket refills 10
		{4, 1000, 100, 2 * time.Second},      // a larger fleet and rate
		{1, 50, 10, 1500 * time.Millisecond}, // one node
	} {
		t.Run(fmt.Sprintf("%d nodes %d/s burst %d out %v", tt.nodes, tt.rate, tt.burst, tt.outage), func(t *testing.T) {
			t.Parallel()
			var now atomic.Int64
			now.Store(1_800_000_000_000_000)
			clock := func() int64 { return now.Load() }
			d := &flakyDriver{mem: memory.New(clock)}
			name := fmt.Sprintf("edge-%d", flakySeq.Add(1))
			nodes := make([]*flakyStore, tt.nodes)
			for i := range nodes {
				nodes[i] = openOnFlaky(t, d, name, fleetstore.Fallback{Nodes: tt.nodes}, fleetstore.WithLocalClock(clock))
			}
			inc := time.Second / time.Duration(tt.rate)
			c := fleetstore.Charge{Kind: fleetstore.Hooks, Tenant: "acme", Increment: inc, Capacity: time.Duration(tt.burst) * inc}
			ctx := context.Background()
			var shared, local int64
			run := func(d time.Duration, wantLocal bool) {
				t.Helper()
				step := inc.Microseconds() / 4
				for end := now.Load() + d.Microseconds(); now.Load() < end; now.Add(step) {
					for _, n := range nodes {
						for {
							res, err := n.Hit(ctx, []fleetstore.Charge{c}, nil)
							if err != nil || res.Local != wantLocal {
								t.Fatalf("hit: %+v %v, want local %v", res, err, wantLocal)
							}
							if res.Outcome != fleetstore.OK {
								break
							}
							if res.Local {
								local++
							} else {
								shared++
							}
						}
					}
				}
			}
			start := now.Load()
			run(time.Second, false)
			d.set(refused)
			run(tt.outage, true)
			d.set(healthy)
			for _, n := range nodes { // the clock stands still meanwhile
				if !waitFor(5*time.Second, func() bool { return !n.FallbackStats().Degraded }) {
					t.Fatalf("a node is still degraded 5s after the store is back")
				}
			}
			run(2*time.Second, false)
			w := time.Duration(now.Load()-start) * time.Microsecond
			limit := int64((w + c.Capacity) / inc)
			refill := min(tt.burst, int64(tt.outage/inc))
			bound := limit + tt.burst + refill + int64(tt.nodes) + 1
			admitted := shared + local
			t.Logf("admitted %d (shared %d, local %d) in %v: the limit's %d, bound %d", admitted, shared, local, w, limit, bound)
			if admitted > bound {
				t.Errorf("admitted %d in %v across an outage of %v, more than the limit's %d + burst %d + refill %d + %d nodes + 1 = %d", admitted, w, tt.outage, limit, tt.burst, refill, tt.nodes, bound)
			}
			if lower := bound - 3*int64(tt.nodes) - 4; admitted < lower {
				t.Errorf("admitted %d, fewer than %d: the bound is not reached", admitted, lower)
			}
		})
	}
}
