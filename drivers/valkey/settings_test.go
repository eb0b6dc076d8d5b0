package valkey

import (
	"context"
	"errors"
	"fmt"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/internal/rediscore"
	"github.com/fleetstore/fleetstore/internal/scripts"
	"github.com/fleetstore/fleetstore/internal/testing/testserver"
	"github.com/fleetstore/fleetstore/nettest"
)

// Each client setting the contract needs has a test here, and each test
// runs twice: with the driver's options (must pass) and with the setting
// undone (must fail), which proves the test would notice its loss.

func withAndWithout(t *testing.T, undo func(*valkey.ClientOption), check func(t *testing.T, undo func(*valkey.ClientOption)) error) {
	t.Helper()
	t.Run("driver settings", func(t *testing.T) {
		if err := check(t, nil); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("setting undone", func(t *testing.T) {
		if err := check(t, undo); err == nil {
			t.Fatal("the check passed with the setting undone: it has no teeth")
		} else {
			t.Logf("fails as expected: %v", err)
		}
	})
}

// TestSettingNoClientCache: client-side caching needs CLIENT TRACKING;
// a server without it (hosted servers often rename or refuse CLIENT) must
// still work.
func TestSettingNoClientCache(t *testing.T) {
	t.Parallel()
	r := startServer(t, testserver.ConfigLines(`rename-command CLIENT ""`))
	withAndWithout(t, func(o *valkey.ClientOption) { o.DisableCache = false }, func(t *testing.T, undo func(*valkey.ClientOption)) error {
		// The first Hit dials and loads the library: 5s, however loaded the
		// machine. Undone, the Hit fails at once on CLIENT TRACKING.
		c := testConn(t, "valkey://"+r.Addr, 5*time.Second, undo)
		_, err := c.Hit(budget(t, 5*time.Second), hooks("cache-"+randName(), time.Millisecond, time.Second), nil)
		return err
	})
}

// TestSettingDialTimeout: a dial to an address that never completes
// the TCP handshake ends within the budget (T4), not after valkey-go's 5s
// default: the build started by a timed-out call is over by then.
func TestSettingDialTimeout(t *testing.T) {
	const timeout = 100 * time.Millisecond
	addr := nettest.BlackHole(t)
	withAndWithout(t, func(o *valkey.ClientOption) { o.Dialer.Timeout = 0 }, func(t *testing.T, undo func(*valkey.ClientOption)) error {
		c := testConn(t, "valkey://"+addr, timeout, undo)
		start := time.Now()
		if err := c.Ping(budget(t, timeout)); !errors.Is(err, fleetstore.ErrTimeout) {
			return fmt.Errorf("ping of a black hole: got %v, want ErrTimeout", err)
		}
		for lazyOf(c).isBuilding() {
			if d := time.Since(start); d > timeout+slack {
				return fmt.Errorf("the connection attempt outlived the budget %v: still running after %v", timeout, d)
			}
			time.Sleep(5 * time.Millisecond)
		}
		return nil
	})
}

// TestSettingWriteTimeout: once the stalled calls have timed out, a
// connection whose server stopped answering is closed after about the
// budget plus the keep-alive gap (1s), not valkey-go's 10s default (T4).
func TestSettingWriteTimeout(t *testing.T) {
	r := startServer(t)
	const timeout = 100 * time.Millisecond
	withAndWithout(t, func(o *valkey.ClientOption) { o.ConnWriteTimeout = 0 }, func(t *testing.T, undo func(*valkey.ClientOption)) error {
		p := startProxy(t, r.Addr)
		c := testConn(t, "valkey://"+p.Addr(), timeout, undo)
		if err := c.Ping(budget(t, timeout)); err != nil {
			return fmt.Errorf("ping through the proxy: %v", err)
		}
		p.DropReplies(true)
		for range 4 {
			if err := c.Ping(budget(t, timeout)); !errors.Is(err, fleetstore.ErrTimeout) {
				return fmt.Errorf("ping of a stalled server: got %v, want ErrTimeout", err)
			}
		}
		deadline := time.Now().Add(valkey.DefaultTCPKeepAlive + timeout + time.Second)
		for p.Closed() == 0 {
			if time.Now().After(deadline) {
				return errors.New("the stalled connection was still open 2.1s after its calls timed out")
			}
			time.Sleep(20 * time.Millisecond)
		}
		return nil
	})
}

// TestLostReplyNotResent: a Hit whose connection breaks after the
// script ran (the reply is lost, the client sees EOF rather than a
// timeout) is not sent again: it was charged once (T5). The driver marks
// no command retryable and turns valkey-go's retries off (DisableRetry,
// pinned by TestOptions).
func TestLostReplyNotResent(t *testing.T) {
	r := startServer(t)
	p := startProxy(t, r.Addr)
	// Same prefix for both conns: direct counts what c charged.
	prefix := "vt" + randName()
	c := testConnPrefixed(t, "valkey://"+p.Addr(), prefix, time.Second, nil)
	direct := testConnPrefixed(t, "valkey://"+r.Addr, prefix, time.Second, nil)
	tenant := "lost-" + randName()
	charge := hooks(tenant, time.Hour, 2*time.Hour) // two units
	// Load the script, so that the lost call is the one that runs it.
	if err := c.Ping(budget(t, time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := direct.Hit(budget(t, time.Second), hooks("load-"+tenant, time.Millisecond, time.Hour), nil); err != nil {
		t.Fatal(err)
	}
	p.hangUp.Store(true)
	_, err := c.Hit(budget(t, time.Second), charge, nil)
	p.hangUp.Store(false)
	if !errors.Is(err, fleetstore.ErrUnavailable) && !errors.Is(err, fleetstore.ErrTimeout) {
		t.Fatalf("hit whose reply was lost: got %v, want ErrUnavailable or ErrTimeout", err)
	}
	ok := 0
	for range 2 {
		res, err := direct.Hit(budget(t, time.Second), charge, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.Outcome == driver.OK {
			ok++
		}
	}
	if ok != 1 {
		t.Fatalf("after one hit whose reply was lost, %d of 2 units were left, want 1", ok)
	}
}

// TestCallDeadline: the caller's deadline reaches the command: a call on
// a stalled connection returns by it, not by the store's timeout (T1).
func TestCallDeadline(t *testing.T) {
	r := startServer(t)
	p := startProxy(t, r.Addr)
	c := testConn(t, "valkey://"+p.Addr(), 2*time.Second, nil)
	if err := c.Ping(budget(t, time.Second)); err != nil {
		t.Fatalf("ping: %v", err)
	}
	p.DropReplies(true)
	const callerBudget = 100 * time.Millisecond
	tenant := "deadline-" + randName()
	claim := driver.Claim{Tenant: tenant, SourceID: "s", Key: "k", HookID: "h", TTL: time.Minute, PendingTTL: time.Minute}
	for name, call := range map[string]func(ctx context.Context) error{
		"hit": func(ctx context.Context) error {
			_, err := c.Hit(ctx, hooks(tenant, time.Millisecond, time.Second), &claim)
			return err
		},
		"commit": func(ctx context.Context) error { return first(c.Commit(ctx, []driver.Claim{claim})) },
		"release": func(ctx context.Context) error {
			return first(c.Release(ctx, []driver.Claim{claim, {Tenant: "other", SourceID: "s", Key: "k", HookID: "h"}}))
		},
		"reset": func(ctx context.Context) error { return c.Reset(ctx, tenant) },
		"ping":  func(ctx context.Context) error { return c.Ping(ctx) },
	} {
		start := time.Now()
		err := call(budget(t, callerBudget))
		if d := time.Since(start); d > callerBudget+slack {
			t.Errorf("%s on a stalled server took %v, caller budget %v", name, d, callerBudget)
		}
		if !errors.Is(err, fleetstore.ErrTimeout) {
			t.Errorf("%s on a stalled server: got %v, want ErrTimeout", name, err)
		}
	}
}

// TestNoScript: after SCRIPT FLUSH and FUNCTION FLUSH, a Hit and a batch
// settle over several tenants (several script calls in one pipeline) run
// the scripts with EVAL, their functions missing, and succeed (T5).
func TestNoScript(t *testing.T) {
	t.Parallel()
	r := startServer(t)
	c := testConn(t, "valkey://"+r.Addr, 5*time.Second, nil)
	claims := manyClaims(6, 3)
	for round := range 2 {
		if err := r.FlushScripts(); err != nil {
			t.Fatal(err)
		}
		if res, err := c.Hit(budget(t, 5*time.Second), hooks(claims[0].Tenant, time.Millisecond, time.Hour), nil); err != nil || res.Outcome != driver.OK {
			t.Fatalf("round %d: hit after the flush: %v %v", round, res, err)
		}
		waitLibrary(t, r) // loaded after the Hit's EVAL: flushed again before the settle
		if err := r.FlushScripts(); err != nil {
			t.Fatal(err)
		}
		for i, err := range each(t)(c.Commit(budget(t, 5*time.Second), claims)) {
			if err != nil {
				t.Fatalf("round %d: commit %d after the flush: %v", round, i, err)
			}
		}
	}
}

// manyClaims returns tenants × perTenant claims, tenants interleaved.
func manyClaims(tenants, perTenant int) []driver.Claim {
	var out []driver.Claim
	id := randName()
	for k := range perTenant {
		for i := range tenants {
			out = append(out, driver.Claim{Tenant: fmt.Sprintf("t{%d}:%s", i, id), SourceID: "src", Key: fmt.Sprintf("key-%d", k),
				HookID: "hook", TTL: time.Minute, PendingTTL: time.Minute})
		}
	}
	return out
}

// TestClusterBatchSettle: a Commit and Release of claims of many tenants
// interleaved, on a cluster, where valkey-go panics on a command whose
// keys span two slots: each claim gets its own result.
func TestClusterBatchSettle(t *testing.T) {
	t.Parallel()
	cl := startCluster(t)
	c := testConn(t, cl.URLScheme("valkey"), time.Second, nil)
	claims := manyClaims(12, 3)
	// One held by another hook: ErrClaimLost for it alone.
	lost := claims[5]
	lost.HookID = "other"
	if res, err := c.Hit(budget(t, time.Second), nil, &lost); err != nil || res.Outcome != driver.OK {
		t.Fatalf("hit: %v %v", res, err)
	}
	for i, err := range each(t)(c.Commit(budget(t, time.Second), claims)) {
		if i == 5 {
			var cle *driver.ClaimLostError
			if !errors.As(err, &cle) || cle.Holder != "other" {
				t.Errorf("commit %d: got %v, want ErrClaimLost held by other", i, err)
			}
		} else if err != nil {
			t.Errorf("commit %d: %v", i, err)
		}
	}
	for i, err := range each(t)(c.Release(budget(t, time.Second), claims)) {
		if i != 5 && !errors.Is(err, driver.ErrAlreadyCommitted) {
			t.Errorf("release %d: got %v, want ErrAlreadyCommitted", i, err)
		}
	}
}

// TestCrossSlotRefused: a script call whose keys hold two hash tags is
// refused before valkey-go builds it (its cluster builder would panic).
func TestCrossSlotRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		give []string
		want bool
	}{
		{[]string{"p:{a}:b", "p:{a}:c:x:y"}, true},
		{[]string{"p:{a}:b"}, true},
		{[]string{"p:{a}:b", "p:{b}:b"}, false},
		{[]string{"p:a:b"}, false},
		{[]string{"p:{}:b"}, false},
		{nil, false},
	} {
		if got := oneTag(tc.give); got != tc.want {
			t.Errorf("oneTag(%q) = %v, want %v", tc.give, got, tc.want)
		}
	}
	cl := startCluster(t)
	c := testConn(t, cl.URLScheme("valkey"), time.Second, nil)
	if err := c.Ping(budget(t, time.Second)); err != nil {
		t.Fatal(err)
	}
	a1, zz2 := scripts.ClaimKey("p", "a", "s", "1"), scripts.ClaimKey("p", "zz", "s", "2")
	calls := []*rediscore.Call{{Script: scripts.Settle, Keys: []string{a1, zz2}, Args: []string{"r", "h", "1000", "h", "1000"}},
		{Script: scripts.Settle, Keys: []string{a1}, Args: []string{"r", "h", "1000"}}}
	c.core.Client().EvalMulti(budget(t, time.Second), rediscore.SendSource, calls)
	if !errors.Is(calls[0].Err, errCrossSlot) {
		t.Errorf("cross-slot call: got %v, want errCrossSlot", calls[0].Err)
	}
	if calls[1].Err != nil {
		t.Errorf("one-slot call beside it: %v", calls[1].Err)
	}
}

// TestCloseReleasesGoroutines: after calls on a cluster (a connection and
// its goroutines per node), Close leaves no goroutine behind (T4). The
// Store's goroutines are those started under the test's pprof label
// (goroutines inherit it), so other tests may run beside it.
//
// valkey-go caveat: when the parallel first dials to the several addresses
// race with the first slot-map read, the connection that lost is closed by
// a goroutine that sleeps 5s first (clusterClient._refresh), whatever
// Close does. So the wait here is 5s plus slack, not the suite's 2s.
func TestCloseReleasesGoroutines(t *testing.T) {
	t.Parallel()
	cl := startCluster(t)
	mark := randName()
	pprof.Do(context.Background(), pprof.Labels(goroutineLabel, mark), func(context.Context) {
		c := testConn(t, cl.URLScheme("valkey"), time.Second, nil)
		for i, claim := range manyClaims(30, 1) {
			if _, err := c.Hit(budget(t, time.Second), hooks(claim.Tenant, time.Millisecond, time.Hour), &claim); err != nil {
				t.Fatalf("hit %d: %v", i, err)
			}
		}
		if labelled(mark) == nil {
			t.Logf("no goroutine while open: nothing to check")
		}
		c.Close()
	})
	deadline := time.Now().Add(7 * time.Second)
	for left := labelled(mark); left != nil; left = labelled(mark) {
		if time.Now().After(deadline) {
			t.Fatalf("goroutines 7s after Close:\n%s", strings.Join(left, "\n\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// goroutineLabel is the pprof label key TestCloseReleasesGoroutines marks
// the Store's goroutines with.
const goroutineLabel = "fleetstore.valkey.test"

// labelled returns the goroutines (one entry per distinct stack) whose
// goroutineLabel is value, from the goroutine profile; nil when none.
func labelled(value string) []string {
	var b strings.Builder
	_ = pprof.Lookup("goroutine").WriteTo(&b, 1)
	want := fmt.Sprintf("%q:%q", goroutineLabel, value)
	_, recs, _ := strings.Cut(b.String(), "\n") // "goroutine profile: total N"
	var out []string
	for _, rec := range strings.Split(recs, "\n\n") {
		if strings.Contains(rec, "\n# labels: {") && strings.Contains(rec, want) {
			out = append(out, rec)
		}
	}
	return out
}
