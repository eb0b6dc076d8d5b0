package fleetstore_test

import (
	"context"
	"math"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/gcra"
)

// TestShareCharge: the local share arithmetic of CONTRACT §8, golden
// values. A share s of a limit (I, C) is charged as I' = ceil(I/s) whole
// µs, C' = max(C, I'), I' capped at 366 days.
func TestShareCharge(t *testing.T) {
	const us = time.Microsecond
	day := 24 * time.Hour
	for _, tt := range []struct {
		name    string
		nodes   int
		share   float64
		inc     time.Duration
		cap     time.Duration
		wantInc time.Duration
		wantCap time.Duration
	}{
		{"one node keeps the limit", 1, 0, 10 * time.Millisecond, 2 * time.Second, 10 * time.Millisecond, 2 * time.Second},
		{"8 nodes: 100/s burst 200 is 12.5/s burst 25", 8, 0, 10 * time.Millisecond, 2 * time.Second, 80 * time.Millisecond, 2 * time.Second},
		{"8 nodes, burst 2: never less than one charge", 8, 0, 10 * time.Millisecond, 20 * time.Millisecond, 80 * time.Millisecond, 80 * time.Millisecond},
		{"3 nodes, 1µs increment", 3, 0, us, time.Hour, 3 * us, time.Hour},
		{"16 nodes, a 4 KiB body at 1 MB/s, burst 8 MiB", 16, 0, 4096 * us, 8388608 * us, 65536 * us, 8388608 * us},
		{"16 nodes, a body over the node's burst still passes alone", 16, 0, 1048576 * us, 8388608 * us, 16777216 * us, 16777216 * us},
		{"share 0.25", 0, 0.25, 10 * time.Millisecond, 2 * time.Second, 40 * time.Millisecond, 2 * time.Second},
		{"share 0.3 rounds the increment up", 0, 0.3, us, time.Second, 4 * us, time.Second},
		{"share 1/3 is 333333 ppm, rounded down", 0, 1.0 / 3, time.Millisecond, time.Second, 3001 * us, time.Second},
		{"share 1 keeps the limit", 0, 1, 7 * us, 70 * us, 7 * us, 70 * us},
		{"share 1e-6, one part per million", 0, 1e-6, us, time.Hour, time.Second, time.Hour},
		{"increment capped at 366 days", 3, 0, 200 * day, 366 * day, gcra.MaxCapacity, gcra.MaxCapacity},
		{"a million nodes of a 366-day increment: no overflow", 1_000_000, 0, 366 * day, 366 * day, gcra.MaxCapacity, gcra.MaxCapacity},
	} {
		t.Run(tt.name, func(t *testing.T) {
			give := fleetstore.Charge{Kind: fleetstore.Bytes, Tenant: "acme", Increment: tt.inc, Capacity: tt.cap}
			got, ok := fleetstore.ShareCharge(tt.nodes, tt.share, give)
			if !ok {
				t.Fatalf("share %v refused", tt.share)
			}
			want := fleetstore.Charge{Kind: fleetstore.Bytes, Tenant: "acme", Increment: tt.wantInc, Capacity: tt.wantCap}
			if got != want {
				t.Errorf("got increment %v capacity %v, want %v %v", got.Increment, got.Capacity, want.Increment, want.Capacity)
			}
		})
	}
	for _, bad := range []float64{0, -0.5, 1.5, 4e-7, math.NaN(), math.Inf(1)} {
		if _, ok := fleetstore.ShareCharge(0, bad, fleetstore.Charge{Increment: us, Capacity: us}); ok {
			t.Errorf("share %v accepted", bad)
		}
	}
}

// TestFallbackBound proves the bound of CONTRACT §8: N nodes, all
// degraded for a time t, each charging at its share 1/N, admit at most
// what the fleet's limit admits in t (its burst, then one charge per
// emission interval), plus one charge per node for rounding. Each node is
// offered far more than the limit (it hits until it is denied, every
// simulated step) on one injected clock. It also admits no less
// than that less N (the share is not stingier than it says). A fallback
// that charged the fleet's whole limit on every node admits about N times
// the bound and fails.
func TestFallbackBound(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		nodes int
		rate  int64 // charges per second, fleet-wide
		burst int64
		t     time.Duration
		cost  int64 // largest cost of a charge (bytes); 1: one unit each
	}{
		{"3 nodes, 100/s, burst 30, 10s", 3, 100, 30, 10 * time.Second, 1},
		{"8 nodes, 100/s, burst 20, 5s", 8, 100, 20, 5 * time.Second, 1},
		{"8 nodes, 10/s, burst 2 below the fleet size, 30s", 8, 10, 2, 30 * time.Second, 1},
		{"1 node, 50/s, burst 5, 2s", 1, 50, 5, 2 * time.Second, 1},
		{"5 nodes, 1000/s, burst 100, 3s", 5, 1000, 100, 3 * time.Second, 1},
		{"4 nodes, bytes 100 kB/s, burst 200 kB, bodies of 1–5000 B, 5s", 4, 100_000, 200_000, 5 * time.Second, 5000},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var now atomic.Int64
			now.Store(1_800_000_000_000_000)
			clock := func() int64 { return now.Load() }
			d := newFlaky()
			d.set(refused)
			nodes := make([]*flakyStore, tt.nodes)
			for i := range nodes {
				nodes[i] = openOnFlaky(t, d, "bound", fleetstore.Fallback{Nodes: tt.nodes}, fleetstore.WithLocalClock(clock))
			}
			perUnit := time.Second / time.Duration(tt.rate) // emission interval of one unit
			rng := rand.New(rand.NewPCG(1, uint64(tt.nodes)))
			ctx := context.Background()
			var admitted int64 // units (bytes for the bytes case)
			perNode := make([]int64, tt.nodes)
			// A step of a quarter of a typical charge: fine enough to meet
			// every instant a charge conforms again, coarse enough to run
			// fast.
			step := min(max((1+tt.cost)/2*perUnit.Microseconds()/4, 10), 10_000)
			start := now.Load()
			for now.Load()-start <= tt.t.Microseconds() {
				for i, n := range nodes {
					for range 10_000 {
						cost := 1 + rng.Int64N(tt.cost)
						c := fleetstore.Charge{Kind: fleetstore.Bytes, Tenant: "acme", Increment: time.Duration(cost) * perUnit, Capacity: time.Duration(tt.burst) * perUnit}
						res, err := n.Hit(ctx, []fleetstore.Charge{c}, nil)
						if err != nil {
							t.Fatalf("hit: %v", err)
						}
						if !res.Local {
							t.Fatalf("a Hit on a refusing store was not decided locally: %+v", res)
						}
						if res.Outcome != fleetstore.OK {
							break
						}
						admitted += cost
						perNode[i] += cost
					}
				}
				now.Add(step)
			}
			fleet := int64(tt.t/perUnit) + tt.burst // what the fleet's limit admits in t, in units
			upper := fleet + int64(tt.nodes)*tt.cost
			lower := max(fleet-int64(tt.nodes)*tt.cost, int64(tt.t/perUnit))
			t.Logf("admitted %d units (per node %v); the fleet's limit admits %d in %v; bound %d", admitted, perNode, fleet, tt.t, upper)
			if admitted > upper {
				t.Errorf("%d nodes admitted %d units in %v, more than the fleet's %d + %d nodes × %d", tt.nodes, admitted, tt.t, fleet, tt.nodes, tt.cost)
			}
			if admitted < lower {
				t.Errorf("%d nodes admitted %d units in %v, fewer than the fleet's %d − %d nodes × %d", tt.nodes, admitted, tt.t, fleet, tt.nodes, tt.cost)
			}
			if got := nodes[0].FallbackStats().LocalDecisions; got == 0 {
				t.Errorf("Stats.LocalDecisions = 0")
			}
		})
	}
}
