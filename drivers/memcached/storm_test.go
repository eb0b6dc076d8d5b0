package memcached

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/fleetstore/fleetstore"
)

// TestStorm sends concurrent charges with claims from several Stores on
// the same servers, at one tenant's two buckets: exactly the burst is
// admitted (G4), every admitted hit holds its claim and no denied hit
// holds one (G3, the undo after a lost bucket race), and of many hooks
// claiming one key exactly one wins (C10).
func TestStorm(t *testing.T) {
	for _, n := range []int{1, 2} {
		t.Run(fmt.Sprintf("%d servers", n), func(t *testing.T) {
			t.Parallel()
			srv := startServers(t, n)
			const stores, workers, perWorker = 4, 8, 6 // 192 hits
			const burst = 50
			core, logs := observer.New(zap.DebugLevel)
			sts := make([]*fleetstore.Store, stores)
			for i := range sts {
				sts[i] = openStore(t, srv, 20*time.Second, fleetstore.WithLogger(zap.New(core)))
			}
			tenant := "tenant-storm-" + randName()
			hooks := fleetstore.Charge{Kind: fleetstore.Hooks, Tenant: tenant, Increment: time.Hour, Capacity: burst * time.Hour}
			// The bytes bucket admits more: the hooks bucket decides.
			bytes := fleetstore.Charge{Kind: fleetstore.Bytes, Tenant: tenant, Increment: time.Minute, Capacity: 2 * burst * time.Minute}
			claimOf := func(w, i int) fleetstore.Claim {
				return fleetstore.Claim{Tenant: tenant, SourceID: "src", Key: fmt.Sprintf("evt-%d-%d", w, i), HookID: fmt.Sprintf("hook-%d-%d", w, i), TTL: time.Hour, PendingTTL: time.Hour}
			}
			var ok, limited atomic.Int64
			admitted := make([][]bool, stores*workers)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for w := range stores * workers {
				admitted[w] = make([]bool, perWorker)
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					st := sts[w%stores]
					for i := range perWorker {
						cl := claimOf(w, i)
						res, err := st.Hit(context.Background(), []fleetstore.Charge{hooks, bytes}, &cl)
						if err != nil {
							t.Errorf("hit: %v", err)
							return
						}
						switch res.Outcome {
						case fleetstore.OK:
							ok.Add(1)
							admitted[w][i] = true
						case fleetstore.RateLimited:
							limited.Add(1)
						default:
							t.Errorf("hit: %v", res.Outcome)
						}
					}
				}()
			}
			close(start)
			wg.Wait()
			if ok.Load() != burst || limited.Load() != stores*workers*perWorker-burst {
				t.Fatalf("%d admitted, %d rate-limited of %d, want exactly %d admitted", ok.Load(), limited.Load(), stores*workers*perWorker, burst)
			}
			t.Logf("%d claims given back after a lost bucket race turned into a denial", logs.FilterMessageSnippet("claim given back").Len())
			// The claims: pending for the admitted hits, absent for the
			// denied ones. A claim-only hit by another hook tells.
			for w := range admitted {
				for i, adm := range admitted[w] {
					cl := claimOf(w, i)
					cl.HookID = "checker"
					res, err := sts[0].Hit(context.Background(), nil, &cl)
					if err != nil {
						t.Fatal(err)
					}
					want := fleetstore.OK
					if adm {
						want = fleetstore.Pending
					}
					if res.Outcome != want {
						t.Errorf("claim of hit %d/%d (admitted %v): another hook gets %v, want %v", w, i, adm, res.Outcome, want)
					}
				}
			}

			// One key, many hooks, several stores.
			for round := range 3 {
				var wins atomic.Int64
				var wg sync.WaitGroup
				start := make(chan struct{})
				for h := range 48 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						<-start
						cl := fleetstore.Claim{Tenant: tenant, SourceID: "race", Key: fmt.Sprint("key-", round), HookID: fmt.Sprint("hook-", h), TTL: time.Hour, PendingTTL: time.Hour}
						res, err := sts[h%stores].Hit(context.Background(), nil, &cl)
						switch {
						case err != nil:
							t.Errorf("claim race: %v", err)
						case res.Outcome == fleetstore.OK:
							wins.Add(1)
						case res.Outcome != fleetstore.Pending:
							t.Errorf("claim race: %v", res.Outcome)
						}
					}()
				}
				close(start)
				wg.Wait()
				if wins.Load() != 1 {
					t.Errorf("round %d: %d of 48 hooks won one key, want 1", round, wins.Load())
				}
			}
		})
	}
}
