package fleetstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/calendar"
)

// TestFallbackQuotaBound proves the quota bound of CONTRACT §8.2. N nodes
// at a share of 1/N charge a daily quota of n. With the store up they
// take U₀ of it, each node seeing the count at its own last Hit, Uᵢ; one
// node sees none. Then, in an outage, each admits exactly floor((n −
// Uᵢ)/N), its share of what was left. Back, the shared store admits the n
// − U₀ it counts as left: the local units are not replayed. A second
// outage in the same day admits nothing more, the nodes' first-outage
// units counted against the counts they see now. So the day admits n plus
// the first outage's units, within n + Σ floor((n − Uᵢ)/N) ≤ 2n. A local
// store that counted the window from 0 against n admits about N times as
// much and fails; one that forgot Uᵢ admits n/N on each node and fails.
func TestFallbackQuotaBound(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		nodes  int
		n      int64
		before int64 // U₀: units the shared store admits before the outage
		cost   int64 // largest cost of a charge
	}{
		{4, 1000, 600, 1},
		{8, 10_000, 9_000, 1},
		{3, 100, 0, 1},
		{8, 10, 4, 1},
		{5, 100_000, 30_000, 700},
	} {
		t.Run(fmt.Sprintf("%d nodes, n %d, %d before, cost 1–%d", tt.nodes, tt.n, tt.before, tt.cost), func(t *testing.T) {
			t.Parallel()
			// A zone where it is noon now: the day ends in about 12h.
			now := time.Now().UTC()
			since := now.Hour()*3600 + now.Minute()*60 + now.Second()
			quota, err := fleetstore.NewQuota("hooks_day", tt.n, calendar.Day, time.FixedZone("noon", 12*3600-since))
			if err != nil {
				t.Fatal(err)
			}
			d := newFlaky()
			nodes := make([]*flakyStore, tt.nodes)
			for i := range nodes {
				nodes[i] = openOnFlaky(t, d, "quota-bound", fleetstore.Fallback{Nodes: tt.nodes})
			}
			rng := rand.New(rand.NewPCG(2, uint64(tt.nodes)))
			ctx := context.Background()
			// hit charges node i once: the units admitted, and whether it
			// was decided locally.
			hit := func(i int) (int64, bool, fleetstore.Result) {
				t.Helper()
				c := quota.Charge("acme", 1+rng.Int64N(tt.cost))
				res, err := nodes[i].Hit(ctx, []fleetstore.Charge{c}, nil)
				if err != nil {
					t.Fatalf("hit: %v", err)
				}
				if res.Outcome != fleetstore.OK {
					return 0, res.Local, res
				}
				return c.Window.Cost, res.Local, res
			}
			seen := make([]int64, tt.nodes) // Uᵢ: the count at node i's last shared Hit
			var shared int64                // units the shared store admitted
			for shared < tt.before {
				i := rng.IntN(tt.nodes - 1) // the last node sees no count
				c := quota.Charge("acme", min(1+rng.Int64N(tt.cost), tt.before-shared))
				res, err := nodes[i].Hit(ctx, []fleetstore.Charge{c}, nil)
				if err != nil || res.Local || res.Outcome != fleetstore.OK {
					t.Fatalf("shared hit: %+v %v", res, err)
				}
				shared += c.Window.Cost
				seen[i] = res.Quota()[0].Used
			}

			// outage admits on each node until a run of denials, and returns
			// the units each admitted.
			outage := func() []int64 {
				t.Helper()
				d.set(refused)
				took := make([]int64, tt.nodes)
				for i := range nodes {
					for denied := 0; denied < 20; {
						units, local, _ := hit(i)
						if !local {
							t.Fatalf("a Hit on a refusing store was not decided locally")
						}
						if units == 0 {
							denied++ // a cost larger than what is left may be followed by a smaller one
						}
						took[i] += units
					}
				}
				return took
			}
			first := outage()
			var local, bound int64
			for i := range nodes {
				allowance := (tt.n - seen[i]) / int64(tt.nodes)
				bound += allowance
				local += first[i]
				if first[i] > allowance || tt.cost == 1 && first[i] != allowance {
					t.Errorf("node %d admitted %d units in the outage; its share of n − Uᵢ = %d − %d is %d",
						i, first[i], tt.n, seen[i], allowance)
				}
			}

			// Back: the shared store admits what it counts as left.
			d.set(healthy)
			for i, n := range nodes {
				waitShared(t, n)
				for denied := 0; denied < 20; {
					units, isLocal, res := hit(i)
					if isLocal {
						t.Fatalf("node %d decided locally with the store back", i)
					}
					if units == 0 {
						denied++
					}
					shared += units
					seen[i] = res.Quota()[0].Used
				}
			}
			if shared != tt.n && tt.cost == 1 || shared > tt.n {
				t.Errorf("the shared store admitted %d units in the day, want n = %d: local units are not replayed", shared, tt.n)
			}
			for i, took := range outage() {
				if took != 0 {
					t.Errorf("node %d admitted %d more units in a second outage; its first took %d of its share of n − Uᵢ = %d − %d",
						i, took, first[i], tt.n, seen[i])
				}
			}
			total := shared + local
			t.Logf("the day admitted %d units: %d shared, %d local; bound n + %d", total, shared, local, bound)
			if total > tt.n+bound || total > 2*tt.n {
				t.Errorf("%d nodes admitted %d units in a day of quota %d, more than n + Σ floor((n − Uᵢ)/N) = %d + %d",
					tt.nodes, total, tt.n, tt.n, bound)
			}
		})
	}
}

// waitShared waits until st decides shared again after an outage.
func waitShared(t *testing.T, st *flakyStore) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for st.FallbackStats().Degraded {
		if time.Now().After(deadline) {
			t.Fatal("still degraded 20s after the store came back")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
