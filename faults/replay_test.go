package faults

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/internal/testing/degradedtest"
	"github.com/fleetstore/fleetstore/nettest"
	"github.com/fleetstore/fleetstore/observe"
)

// TestReplayAfterOutage queues 10 000 commits on a Store with a fallback
// while its server is killed, restarts the server and measures the
// replay: every commit reaches the shared store (a sample of 500 read
// back as Duplicates at another Store), the outbox empties within 10s of
// the restart, and the figures are the time from the restart to the first
// shared decision and the replay's throughput (commits/s, from the first
// replayed commit to the last, as Stats shows them).
func TestReplayAfterOutage(t *testing.T) {
	const (
		budget  = 100 * time.Millisecond
		commits = 10_000
	)
	forEach(t, func(t *testing.T, tg target) {
		srv := tg.start(t)
		prefix := randomName("replay-")
		q := fmt.Sprintf("timeout=%v&key_prefix=%s&fallback_nodes=2", budget, prefix)
		s, err := fleetstore.Open(tg.url(srv.Addr(), q))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		reader, err := fleetstore.Open(tg.url(srv.Addr(), fmt.Sprintf("timeout=2s&key_prefix=%s", prefix)))
		if err != nil {
			t.Fatal(err)
		}
		defer reader.Close()
		waitReady(t, reader)

		if err := srv.Kill(); err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		tenant := randomName("tenant-")
		claimOf := func(i int) fleetstore.Claim {
			return fleetstore.Claim{Tenant: tenant, SourceID: "github", Key: fmt.Sprintf("evt-%d", i), HookID: fmt.Sprintf("hook-%d", i),
				Node: "node-0", TTL: time.Hour, PendingTTL: 30 * time.Second}
		}
		queuedAt := time.Now()
		for i := range commits {
			if err := s.Commit(ctx, claimOf(i)); err != nil {
				t.Fatalf("commit %d during the outage: %v", i, err)
			}
		}
		queueTook := time.Since(queuedAt)
		if st := s.FallbackStats(); st.Outbox != commits || !st.Degraded {
			t.Fatalf("stats %+v, want %d queued, degraded", st, commits)
		}
		if err := srv.Restart(); err != nil {
			t.Fatal(err)
		}
		upAt := time.Now()
		var firstAt, lastAt time.Time
		var st observe.Stats
		for time.Since(upAt) < 10*time.Second {
			st = s.FallbackStats()
			if st.Replayed > 0 && firstAt.IsZero() {
				firstAt = time.Now()
			}
			if st.Replayed+st.Conflicts+st.Expired >= commits && !st.Degraded {
				lastAt = time.Now()
				break
			}
			time.Sleep(100 * time.Microsecond)
		}
		if lastAt.IsZero() {
			t.Fatalf("replay not done 10s after the restart: %+v", st)
		}
		if st.Replayed != commits || st.Outbox != 0 {
			t.Errorf("stats %+v, want %d replayed, outbox empty", st, commits)
		}
		var firstShared time.Duration
		for {
			res, err := s.Hit(ctx, []fleetstore.Charge{{Kind: fleetstore.Hooks, Tenant: tenant, Increment: time.Microsecond, Capacity: time.Hour}}, nil)
			if err == nil && !res.Local {
				firstShared = time.Since(upAt)
				break
			}
		}
		for i := 0; i < commits; i += commits / 500 {
			retry := claimOf(i)
			retry.HookID = "retry"
			res, err := reader.Hit(ctx, nil, &retry)
			if err != nil || res.Outcome != fleetstore.Duplicate || res.HookID != claimOf(i).HookID {
				t.Errorf("commit %d after the replay: %+v %v, want Duplicate of %s", i, res, err, claimOf(i).HookID)
			}
		}
		took := lastAt.Sub(firstAt)
		t.Logf("FIGURE replay driver=%s commits=%d queue_took=%v restart_to_first_replayed=%v replay_took=%v replay_rate=%.0f/s restart_to_first_shared=%v",
			tg.name, commits, queueTook.Round(time.Millisecond), firstAt.Sub(upAt).Round(time.Millisecond), took.Round(time.Millisecond),
			float64(commits)/max(took.Seconds(), 1e-3), firstShared.Round(time.Millisecond))
	})
}

// TestReplayMeetsPending runs degradedtest.ReplayMeetsPending on each
// network driver: a replayed commit that meets another hook's pending
// claim waits until that claim is committed (a conflict), released or
// expired (the commit lands), CONTRACT §8. A's path is a proxy
// (nettest) that is refused until it starts; B reaches the server
// directly; hook-b's claim expires in real time (3s).
func TestReplayMeetsPending(t *testing.T) {
	const pendingTTL = 3 * time.Second
	forEach(t, func(t *testing.T, tg target) {
		srv := tg.start(t)
		for _, end := range degradedtest.Ends {
			t.Run(end, func(t *testing.T) {
				prefix := randomName("pending-")
				addr := nettest.RefusedAddr(t)
				conflicts := &degradedtest.Conflicts{}
				a, err := fleetstore.Open(tg.url(addr, "timeout=200ms&fallback_nodes=2&key_prefix="+prefix),
					fleetstore.WithFallback(fleetstore.Fallback{OnConflict: conflicts.Add}))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { a.Close() })
				b := openStoreAt(t, tg, srv.Addr(), "timeout=2s&key_prefix="+prefix)
				waitReady(t, b)
				degradedtest.ReplayMeetsPending(t, &degradedtest.Fleet{A: a, B: b,
					Cut:        func() {}, // refused until Back
					Back:       func() { nettest.NewProxyAt(t, addr, srv.Addr(), nil) },
					PendingTTL: pendingTTL,
					RealTime:   true,
					Expire:     func() { time.Sleep(pendingTTL) },
					Conflicts:  conflicts}, end)
			})
		}
	})
}

// openStoreAt opens tg's driver on addr with the query q, and closes it at
// Cleanup.
func openStoreAt(t *testing.T, tg target, addr, q string) *fleetstore.Store {
	t.Helper()
	s, err := fleetstore.Open(tg.url(addr, q))
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
