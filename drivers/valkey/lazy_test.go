package valkey

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/internal/testing/testserver"
	"github.com/fleetstore/fleetstore/nettest"
)

// waitOK hits st until it answers OK, for at most d (the build backoff is
// at most 1s).
func waitOK(t *testing.T, st *fleetstore.Store, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	tenant := "lazy-" + randName()
	for {
		res, err := st.Hit(context.Background(), []fleetstore.Charge{{Kind: fleetstore.Hooks, Tenant: tenant, Increment: time.Millisecond, Capacity: time.Hour}}, nil)
		if err == nil && res.Outcome == fleetstore.OK {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no OK %v after the server started: %v %v", d, res, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// downCall checks that calls on st fail within the budget with
// ErrUnavailable or ErrTimeout while nothing listens.
func downCall(t *testing.T, st *fleetstore.Store, budget time.Duration) {
	t.Helper()
	for i := range 3 {
		start := time.Now()
		err := st.Ping(context.Background())
		d := time.Since(start)
		if !errors.Is(err, fleetstore.ErrUnavailable) && !errors.Is(err, fleetstore.ErrTimeout) {
			t.Fatalf("ping %d with the server down: got %v, want ErrUnavailable or ErrTimeout", i, err)
		}
		if d > budget+slack {
			t.Fatalf("ping %d with the server down took %v, budget %v", i, d, budget)
		}
	}
}

// TestLazyStartSingle: open against a port where nothing listens, call
// (error within budget), start the server on that port, call again
// (success), with no reopen (T3).
func TestLazyStartSingle(t *testing.T) {
	port := testserver.FreePort(t)
	const budget = 200 * time.Millisecond
	st, err := fleetstore.Open("valkey://127.0.0.1:"+strconv.Itoa(port), fleetstore.WithTimeout(budget))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	downCall(t, st, budget)
	r := testserver.StartRedisAt(t, port, testserver.Binary(serverBinary))
	t.Logf("server: %s on %s, started after the first calls", serverBinary, r.Addr)
	waitOK(t, st, 3*time.Second)
}

// TestLazyStartCluster is TestLazyStartSingle for a 3-master cluster
// named by three addresses.
func TestLazyStartCluster(t *testing.T) {
	ports := freePorts(t, 3)
	const budget = 200 * time.Millisecond
	raw := "valkey://127.0.0.1:" + strconv.Itoa(ports[0]) + "?addr=127.0.0.1:" + strconv.Itoa(ports[1]) + "&addr=127.0.0.1:" + strconv.Itoa(ports[2])
	st, err := fleetstore.Open(raw, fleetstore.WithTimeout(budget))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	downCall(t, st, budget)
	c := testserver.StartClusterAt(t, [3]int(ports), testserver.Binary(serverBinary))
	t.Logf("cluster: %s on %v, started after the first calls", serverBinary, c.Addrs())
	waitOK(t, st, 3*time.Second)
	// A claim and its commit, on the cluster, through the same Store.
	claim := fleetstore.Claim{Tenant: "t-" + randName(), SourceID: "s", Key: "k", HookID: "h", TTL: time.Minute, PendingTTL: time.Minute}
	if res, err := st.Hit(context.Background(), nil, &claim); err != nil || res.Outcome != fleetstore.OK {
		t.Fatalf("hit with a claim: %v %v", res, err)
	}
	if err := st.Commit(context.Background(), claim); err != nil {
		t.Fatalf("commit: %v", err)
	}
}

// TestLazyBuildSingleFlight: 50 concurrent first calls against a server
// that accepts and never answers make one connection attempt, and each
// caller returns by its own deadline, not the build's.
func TestLazyBuildSingleFlight(t *testing.T) {
	l := nettest.NewSilent(t)
	// The store timeout (so the dial and handshake timeout) is long; the
	// callers' deadlines are short.
	c := testConn(t, "valkey://"+l.Addr(), 2*time.Second, nil)
	const callerBudget = 80 * time.Millisecond
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			start := time.Now()
			err := c.Ping(budget(t, callerBudget))
			if d := time.Since(start); d > callerBudget+slack {
				t.Errorf("ping took %v, caller budget %v", d, callerBudget)
			}
			if !errors.Is(err, fleetstore.ErrTimeout) {
				t.Errorf("ping: got %v, want ErrTimeout", err)
			}
		})
	}
	wg.Wait()
	if n := l.Accepted(); n != 1 {
		t.Errorf("50 concurrent first calls made %d connections, want 1 (one build for all)", n)
	}
}

// TestLazyBuildBackoff: after a failed build, calls fail at once without
// I/O until the backoff has passed; then one call builds again.
func TestLazyBuildBackoff(t *testing.T) {
	l := nettest.NewHangUp(t) // every connection is closed at once: the build fails fast
	c := testConn(t, "valkey://"+l.Addr(), time.Second, nil)
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			err := c.Ping(budget(t, time.Second))
			if !errors.Is(err, fleetstore.ErrUnavailable) {
				t.Errorf("ping against a server that hangs up: got %v, want ErrUnavailable", err)
			}
		})
	}
	wg.Wait()
	first := l.Accepted()
	if first < 1 || first > 2 {
		t.Fatalf("20 concurrent calls made %d connections, want 1 (2 if one came after the build failed)", first)
	}
	for range 20 { // well within the first backoff (50ms)
		start := time.Now()
		if err := c.Ping(budget(t, time.Second)); !errors.Is(err, fleetstore.ErrUnavailable) {
			t.Fatalf("ping in the backoff: got %v, want ErrUnavailable", err)
		}
		if d := time.Since(start); d > 10*time.Millisecond {
			t.Fatalf("ping in the backoff took %v: it should fail at once", d)
		}
	}
	if n := l.Accepted(); n > first+1 {
		t.Errorf("calls in the backoff made %d more connections", n-first)
	}
	time.Sleep(backoffMax + 50*time.Millisecond)
	_ = c.Ping(budget(t, time.Second))
	if n := l.Accepted(); n == first {
		t.Errorf("a call after the backoff did not build again")
	}
}

func TestBackoff(t *testing.T) {
	for _, tc := range []struct {
		give int
		want time.Duration
	}{{1, 50 * time.Millisecond}, {2, 100 * time.Millisecond}, {3, 200 * time.Millisecond}, {5, 800 * time.Millisecond}, {6, time.Second}, {60, time.Second}} {
		if got := backoff(tc.give); got != tc.want {
			t.Errorf("backoff(%d) = %v, want %v", tc.give, got, tc.want)
		}
	}
}
