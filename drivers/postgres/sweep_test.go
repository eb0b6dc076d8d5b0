package postgres

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/internal/testing/testserver"
)

// TestTablesStayBounded: under a steady load of short-lived records (a
// fresh tenant's bucket, expiring in 20ms, and a claim committed for 50ms
// per Hit) the sweep keeps the tables' rows to a fraction of what was
// written, and deletes every row once the load stops.
func TestTablesStayBounded(t *testing.T) {
	srv := testserver.StartPostgres(t)
	admin := adminPool(t, srv)
	st := openStore(t, srv.URL()+"&timeout=2s&sweep_interval=100ms")
	ctx := context.Background()
	hooks := fleetstore.MustLimit(fleetstore.NewLimit(fleetstore.Hooks, 50, time.Second, 1)) // 20ms each
	var written atomic.Int64
	var wg sync.WaitGroup
	stop := time.Now().Add(3 * time.Second)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(stop); i++ {
				tenant := fmt.Sprintf("t%d-%d", w, i)
				claim := fleetstore.Claim{Tenant: tenant, SourceID: "s", Key: "k", HookID: "h",
					TTL: 50 * time.Millisecond, PendingTTL: 50 * time.Millisecond}
				res, err := st.Hit(ctx, []fleetstore.Charge{hooks.Charge(tenant, 1)}, &claim)
				if err != nil || res.Outcome != fleetstore.OK {
					continue
				}
				if st.Commit(ctx, claim) == nil {
					written.Add(2)
				}
			}
		}()
	}
	wg.Wait()
	atEnd := rows(t, admin)
	if w := written.Load(); w < 200 || atEnd > w/2 {
		t.Errorf("%d rows in the tables after %d written under load: want at most half", atEnd, w)
	}
	deadline := time.Now().Add(5 * time.Second)
	for n := rows(t, admin); n > 0; n = rows(t, admin) {
		if time.Now().After(deadline) {
			t.Fatalf("%d expired rows still in the tables 5s after the load", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("%d records written in 3s, %d rows left at the end of the load, none 5s later", written.Load(), atEnd)
}

// rows counts the rows of both tables, expired or not.
func rows(t *testing.T, admin *pgxpool.Pool) int64 {
	t.Helper()
	var n int64
	err := admin.QueryRow(context.Background(),
		"SELECT (SELECT count(*) FROM fleetstore.buckets_v1) + (SELECT count(*) FROM fleetstore.claims_v1)").Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
