package faults

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/internal/testing/testserver"
)

// TestClusterMasterKilled: on a 3-master, 3-replica cluster
// (cluster-node-timeout 2s) under load, kill -9 of a master that stays
// down. The cluster promotes its replica after about twice the node
// timeout; every call of every tenant must succeed again within
// recoverBound of the promotion, not at go-redis's periodic slot-map
// reload (60s): the Redis driver reloads the map on the errors that mean
// it is stale. Between the kill and the promotion the cluster answers
// CLUSTERDOWN for every slot (cluster-require-full-coverage yes): those
// calls fail, within their budget. Replication is asynchronous: the test
// also counts the committed claims the promoted replica never received.
func TestClusterMasterKilled(t *testing.T) {
	const (
		budget       = 100 * time.Millisecond
		nodeTimeout  = 2 * time.Second
		recoverBound = 2 * time.Second
	)
	for _, d := range []struct{ scheme, bin string }{{"redis+cluster", "redis-server"}, {"valkey", testserver.ValkeyBinary()}} {
		t.Run(d.scheme, func(t *testing.T) {
			t.Parallel() // two clusters side by side: each run is mostly waiting
			cl := testserver.StartClusterReplicas(t, nodeTimeout, testserver.Binary(d.bin))
			t.Logf("server: %s cluster, 3 masters + 3 replicas, cluster-node-timeout %v", d.bin, nodeTimeout)
			st, err := fleetstore.Open(cl.URLScheme(d.scheme) + "&timeout=" + budget.String() + "&key_prefix=" + randomName("failover-"))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			// Two tenants on the master to kill, two elsewhere.
			var onKilled, elsewhere []string
			for i := 0; len(onKilled) < 2 || len(elsewhere) < 2; i++ {
				tenant := fmt.Sprintf("tenant%d", i)
				v, err := cl.Nodes[0].Do("CLUSTER", "KEYSLOT", "{"+tenant+"}")
				if err != nil {
					t.Fatal(err)
				}
				if slot, _ := v.(int64); slot < 16384/3 {
					if len(onKilled) < 2 {
						onKilled = append(onKilled, tenant)
					}
				} else if len(elsewhere) < 2 {
					elsewhere = append(elsewhere, tenant)
				}
			}
			tenants := append(onKilled, elsewhere...)
			for _, tenant := range tenants {
				waitReady(t, st)
				if _, err := newHooks(tenant, 99).hit(st); err != nil {
					t.Fatalf("warm-up hit of %s: %v", tenant, err)
				}
			}

			pr := startProbe()
			done := make(chan struct{})
			recs := make([][]record, len(tenants))
			var mu sync.Mutex
			var committed []fleetstore.Claim // Commit returned nil
			var wg sync.WaitGroup
			for w, tenant := range tenants {
				wg.Go(func() {
					h := newHooks(tenant, w)
					for {
						select {
						case <-done:
							return
						default:
						}
						start := time.Now()
						claim, err := h.hit(st)
						recs[w] = append(recs[w], record{op: "hit", start: start, took: time.Since(start), err: err})
						if err == nil {
							start := time.Now()
							err := st.Commit(context.Background(), claim)
							recs[w] = append(recs[w], record{op: "commit", start: start, took: time.Since(start), err: err})
							if err == nil {
								mu.Lock()
								committed = append(committed, claim)
								mu.Unlock()
							}
						}
						time.Sleep(2 * time.Millisecond)
					}
				})
			}
			time.Sleep(300 * time.Millisecond)
			if err := cl.Nodes[0].Kill(); err != nil {
				close(done)
				wg.Wait()
				t.Fatalf("kill: %v", err)
			}
			killed := time.Now()
			promoted, err := waitPromoted(cl.Replicas[0], 30*time.Second)
			if err != nil {
				close(done)
				wg.Wait()
				t.Fatal(err)
			}
			time.Sleep(recoverBound + time.Second)
			close(done)
			wg.Wait()
			slack := pr.slack(schedSlack)

			var all []record
			for _, rs := range recs {
				all = append(all, rs...)
			}
			checkCalls(t, all, budget, slack, false)
			var lastFail time.Time
			failedAfter := 0
			for w, rs := range recs {
				for _, r := range rs {
					if r.err == nil {
						continue
					}
					lastFail = maxTime(lastFail, r.end())
					if r.start.After(promoted.Add(recoverBound)) {
						if failedAfter++; failedAfter <= 5 {
							t.Errorf("tenant %s: hit at +%v after the promotion failed: %v", tenants[w], r.start.Sub(promoted).Round(time.Millisecond), r.err)
						}
					}
				}
			}
			recovery := lastFail.Sub(promoted)
			// What the failover lost: claims committed (acknowledged by the
			// old master) that the promoted replica never received, found
			// by another hook's Hit (OK: lost; Duplicate: kept).
			lost := 0
			for _, c := range committed {
				again := c
				again.HookID = "again-" + c.HookID
				if res, err := st.Hit(context.Background(), nil, &again); err == nil && res.Outcome != fleetstore.Duplicate {
					lost++
				} else if err != nil {
					t.Errorf("read back %s: %v", c.Key, err)
				}
			}
			t.Logf("FIGURE failover driver=%s calls=%d failed=%d promotion_after_kill=%v last_failure_after_promotion=%v failed_after_bound=%d committed=%d lost_in_failover=%d",
				d.scheme, len(all), failed(all), promoted.Sub(killed).Round(time.Millisecond), recovery.Round(time.Millisecond), failedAfter, len(committed), lost)
			for _, tenant := range onKilled {
				if _, err := newHooks(tenant, 100).hit(st); err != nil {
					t.Errorf("tenant %s on the promoted replica after the test: %v", tenant, err)
				}
			}
		})
	}
}

// waitPromoted waits until r reports itself a master, and returns when.
func waitPromoted(r *testserver.Redis, d time.Duration) (time.Time, error) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		info, err := r.Info("replication")
		if err == nil && testserver.InfoField(info, "role") == "master" {
			return time.Now(), nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Time{}, fmt.Errorf("replica %s not promoted after %v", r.Addr, d)
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
