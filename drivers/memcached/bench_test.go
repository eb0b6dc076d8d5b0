package memcached

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore"
)

// BenchmarkHit charges two buckets and takes a claim on a fresh key per
// Hit (3 round trips: gets, add, cas) against a local memcached, across
// 1000 tenants whose buckets never run dry, from 1 and from 64 goroutines.
// It reports throughput and p50/p99 latency.
func BenchmarkHit(b *testing.B) {
	for _, conc := range []int{1, 64} {
		b.Run(fmt.Sprintf("concurrency=%d", conc), func(b *testing.B) {
			srv := startServers(b, 1)
			st, err := fleetstore.Open(storeURL(b, srv), fleetstore.WithTimeout(time.Second))
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			var n atomic.Int64
			lat := make([][]time.Duration, conc)
			var wg sync.WaitGroup
			b.ResetTimer()
			for w := range conc {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						i := n.Add(1)
						if i > int64(b.N) {
							return
						}
						tenant := fmt.Sprint("bench-tenant-", i%1000)
						charges := []fleetstore.Charge{
							{Kind: fleetstore.Hooks, Tenant: tenant, Increment: time.Microsecond, Capacity: time.Hour},
							{Kind: fleetstore.Bytes, Tenant: tenant, Increment: time.Microsecond, Capacity: time.Hour},
						}
						cl := fleetstore.Claim{Tenant: tenant, SourceID: "bench", Key: fmt.Sprint("evt-", i), HookID: "hook", TTL: time.Minute, PendingTTL: time.Minute}
						start := time.Now()
						res, err := st.Hit(context.Background(), charges, &cl)
						lat[w] = append(lat[w], time.Since(start))
						if err != nil || res.Outcome != fleetstore.OK {
							b.Errorf("hit: %v, %v", res, err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			all := slices.Concat(lat...)
			slices.Sort(all)
			if len(all) > 0 {
				b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
				b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
				b.ReportMetric(float64(len(all))/b.Elapsed().Seconds(), "hits/s")
			}
		})
	}
}
