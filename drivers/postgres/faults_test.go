package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/internal/testing/testserver"
)

// hitOnce is a Hit of a fresh claim alone.
func hitOnce(st *fleetstore.Store, key string) (fleetstore.Result, error) {
	c := fleetstore.Claim{Tenant: "acme", SourceID: "s", Key: key, HookID: "h", TTL: time.Minute,
		PendingTTL: time.Minute}
	return st.Hit(context.Background(), nil, &c)
}

// TestServerFaults: a killed server (SIGKILL, its backends with it) fails
// calls with ErrUnavailable within the budget; a paused one (SIGSTOP)
// times them out at the budget; once it is back, calls succeed on the same
// Store.
func TestServerFaults(t *testing.T) {
	srv := testserver.StartPostgres(t)
	const budget = 300 * time.Millisecond
	st := openStore(t, srv.URL()+"&timeout=300ms")
	// The first calls connect and install the schema: on a loaded machine
	// that can outlast the budget a few times, which is not what this test
	// is of.
	warm := 0
	if err := eventually(func() error {
		warm++
		_, err := hitOnce(st, "warm"+strconv.Itoa(warm))
		return err
	}); err != nil {
		t.Fatalf("warm-up hit: %v", err)
	}

	if err := srv.Freeze(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err := hitOnce(st, "paused")
	took := time.Since(start)
	if err := srv.Thaw(); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(err, fleetstore.ErrTimeout) || took > budget+200*time.Millisecond {
		t.Errorf("hit on a paused server: %v after %v, want ErrTimeout by the budget %v", err, took, budget)
	}
	if err := eventually(func() error { _, err := hitOnce(st, "thawed"); return err }); err != nil {
		t.Fatalf("hit after the thaw: %v", err)
	}

	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	_, err = hitOnce(st, "killed")
	took = time.Since(start)
	if !errors.Is(err, fleetstore.ErrUnavailable) && !errors.Is(err, fleetstore.ErrTimeout) ||
		took > budget+200*time.Millisecond {
		t.Errorf("hit on a killed server: %v after %v, want ErrUnavailable within the budget", err, took)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := eventually(func() error { _, err := hitOnce(st, "restarted"); return err }); err != nil {
		t.Fatalf("hit after the restart: %v", err)
	}
}

// eventually retries f for up to 10s.
func eventually(f func() error) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := f()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestCommitsGrouped: the Commits of concurrent callers go in rounds,
// fewer settle_v1 calls than Commits, each claim settled.
func TestCommitsGrouped(t *testing.T) {
	srv := testserver.StartPostgres(t, "track_functions=all")
	admin := adminPool(t, srv)
	st := openStore(t, srv.URL()+"&timeout=5s&pool_max_conns=2")
	ctx := context.Background()
	const n = 64
	claims := make([]fleetstore.Claim, n)
	for i := range claims {
		claims[i] = fleetstore.Claim{Tenant: "acme", SourceID: "s", Key: fmt.Sprint("k", i), HookID: "h",
			TTL: time.Minute, PendingTTL: time.Minute}
		if _, err := st.Hit(ctx, nil, &claims[i]); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for i := range claims {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := st.Commit(ctx, claims[i]); err != nil {
				t.Errorf("commit %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	for i := range claims {
		other := claims[i]
		other.HookID = "h2"
		if res, err := st.Hit(ctx, nil, &other); err != nil || res.Outcome != fleetstore.Duplicate {
			t.Fatalf("claim %d after its commit: %v %v, want duplicate", i, res.Outcome, err)
		}
	}
	// A session reports its function calls once idle for a second: all
	// 2n Hits reported, its Commits before them are too.
	var calls int64
	err := eventually(func() error {
		if _, err := admin.Exec(ctx, "SELECT pg_stat_clear_snapshot()"); err != nil {
			return err
		}
		var hits int64
		err := admin.QueryRow(ctx, "SELECT coalesce(sum(calls) FILTER (WHERE funcname = 'hit_v2'), 0), "+
			"coalesce(sum(calls) FILTER (WHERE funcname = 'settle_v1'), 0) FROM pg_stat_user_functions").
			Scan(&hits, &calls)
		if err == nil && hits < 2*n {
			err = fmt.Errorf("%d of %d hit_v2 calls reported yet", hits, 2*n)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if calls == 0 || calls >= n {
		t.Fatalf("%d concurrent Commits made %d settle_v1 calls, want fewer (grouped)", n, calls)
	}
	t.Logf("%d concurrent Commits in %d settle_v1 calls", n, calls)
}
