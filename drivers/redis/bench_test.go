package redis

import (
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/internal/testing/testserver"
)

// BenchmarkHit measures one Hit (two charges and a claim on a fresh key)
// against a local redis-server, serially and with 64 goroutines, next to a
// Ping on the same client: one round trip is the floor a Hit can reach.
//
//	go test -run '^$' -bench . -benchtime 5s ./drivers/redis/
func BenchmarkHit(b *testing.B) {
	srv := testserver.StartRedis(b)
	st, _ := openStore(b, srv.URL()+"?pool_size=128")
	var seq atomic.Int64
	hit := func(b *testing.B) {
		n := seq.Add(1)
		tenant := "tenant-" + strconv.FormatInt(n%1000, 10)
		charges := []fleetstore.Charge{
			{Kind: fleetstore.Hooks, Tenant: tenant, Increment: time.Microsecond, Capacity: time.Hour},
			{Kind: fleetstore.Bytes, Tenant: tenant, Increment: time.Microsecond, Capacity: time.Hour},
		}
		cl := &fleetstore.Claim{Tenant: tenant, SourceID: "github", Key: "evt-" + strconv.FormatInt(n, 10),
			HookID: "hook-" + strconv.FormatInt(n, 10), TTL: time.Minute, PendingTTL: time.Minute}
		res, err := st.Hit(b.Context(), charges, cl)
		if err != nil || res.Outcome != fleetstore.OK {
			b.Fatalf("hit: %v %v", res, err)
		}
	}
	hit(b) // connect, load the script
	b.Run("serial", func(b *testing.B) {
		for b.Loop() {
			hit(b)
		}
	})
	b.Run("ping", func(b *testing.B) {
		for b.Loop() {
			if err := st.Ping(b.Context()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel64", func(b *testing.B) {
		b.SetParallelism(64 / max(1, testingProcs()))
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				hit(b)
			}
		})
	})
}

func testingProcs() int { return runtime.GOMAXPROCS(0) }
