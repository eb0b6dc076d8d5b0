package memcached

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/internal/testing/testserver"
	"github.com/fleetstore/fleetstore/nettest"
)

// TestMaxConnsBurst releases 256 callers at once, twice, on a Store with
// max_conns=8, and counts the connections two ways: every millisecond the
// sockets this process holds connected to the server, never more than 8; and the connections the server accepted during the
// bursts (stats total_connections), at most 8, as no call fails and no
// session is dropped (max_idle_conns is max_conns). Every call is
// answered, and no socket is left after Close. Without the cap the
// driver opens about one socket per caller in flight.
func TestMaxConnsBurst(t *testing.T) {
	addr := startServers(t, 1)[0]
	if _, err := socketsTo(addr); err != nil {
		t.Skipf("cannot count sockets: %v", err)
	}
	stats := testserver.DialStats(t, addr)
	accepted0 := total(t, stats)
	base, _ := socketsTo(addr) // the stats connection
	mine := func() (int, error) {
		n, err := socketsTo(addr)
		return n - base, err
	}
	const maxConns, callers, rounds = 8, 256, 2
	st, err := fleetstore.Open(storeURL(t, []string{addr})+"&max_conns="+strconv.Itoa(maxConns), fleetstore.WithTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	quit, done := make(chan struct{}), make(chan struct{})
	peak, samples := 0, 0
	var sampleErr error
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			n, err := mine()
			if err != nil {
				sampleErr = err
				return
			}
			peak, samples = max(peak, n), samples+1
			select {
			case <-quit:
				return
			case <-tick.C:
			}
		}
	}()
	for r := range rounds {
		var ready, wg sync.WaitGroup
		start := make(chan struct{})
		for i := range callers {
			ready.Add(1)
			wg.Add(1)
			go func() {
				defer wg.Done()
				tenant := fmt.Sprintf("burst-%d-%d", r, i)
				ch := fleetstore.Charge{Kind: fleetstore.Hooks, Tenant: tenant, Increment: time.Microsecond, Capacity: time.Hour}
				cl := fleetstore.Claim{Tenant: tenant, SourceID: "s", Key: "k", HookID: "h", TTL: time.Minute, PendingTTL: time.Minute}
				ready.Done()
				<-start
				res, err := st.Hit(context.Background(), []fleetstore.Charge{ch}, &cl)
				if err != nil || res.Outcome != fleetstore.OK {
					t.Errorf("hit %d: %v, %v; want OK", i, res.Outcome, err)
				}
			}()
		}
		ready.Wait()
		close(start)
		wg.Wait()
	}
	close(quit)
	<-done
	if sampleErr != nil {
		t.Fatalf("count sockets: %v", sampleErr)
	}
	t.Logf("max_conns=%d, %d callers × %d: at most %d sockets to the server in %d samples", maxConns, callers, rounds, peak, samples)
	if peak == 0 {
		t.Fatal("no socket to the server seen: the count is broken")
	}
	if peak > maxConns {
		t.Errorf("%d sockets to the server during the bursts; want at most max_conns=%d", peak, maxConns)
	}
	if n, _ := mine(); n > maxConns {
		t.Errorf("%d sockets to the server after the bursts; want at most %d", n, maxConns)
	}
	// A dial storm (hundreds of sockets without the cap) is the bug; one
	// or two sockets closed and dialed again on a stalled machine are not
	// (the peak above is the cap's bound).
	if n := total(t, stats) - accepted0; n > maxConns+maxConns/4 {
		t.Errorf("the server accepted %d connections during the bursts; want at most max_conns=%d (+%d redials)", n, maxConns, maxConns/4)
	} else {
		t.Logf("the server accepted %d connections", n)
	}
	st.Close()
	if n, _ := mine(); n != 0 {
		t.Errorf("%d sockets to the server after Close; want 0", n)
	}
}

// TestMaxConnsWait fills max_conns=2 with calls to a server that never
// answers: 30 more callers wait, in their own goroutines only, and each
// returns ErrTimeout by its own deadline + 10ms (T1); the server never
// sees a third connection.
func TestMaxConnsWait(t *testing.T) {
	silent := nettest.NewSilent(t)
	const budget = 500 * time.Millisecond
	const slack = 10*time.Millisecond + 30*time.Millisecond // + scheduling on a loaded machine
	runtime.GC()
	before := runtime.NumGoroutine()
	st, err := fleetstore.Open(storeURL(t, []string{silent.Addr()})+"&max_conns=2", fleetstore.WithTimeout(budget))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var holders sync.WaitGroup
	for range 2 {
		holders.Add(1)
		go func() {
			defer holders.Done()
			if err := st.Ping(context.Background()); !errors.Is(err, fleetstore.ErrTimeout) {
				t.Errorf("ping of a silent server: %v, want ErrTimeout", err)
			}
		}()
	}
	waitAccepted(t, silent, 2)

	const waiters = 30
	var wg sync.WaitGroup
	for i := range waiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := 50*time.Millisecond + time.Duration(i)*5*time.Millisecond
			ctx, cancel := context.WithTimeout(context.Background(), d)
			defer cancel()
			start := time.Now()
			err := storeCalls()[1+i%4].call(ctx, st) // not hit: Hits of one tenant queue on its stripe first
			took := time.Since(start)
			if !errors.Is(err, fleetstore.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(fmt.Sprint(err), "wait for a connection") {
				t.Errorf("waiter %d: %v, want ErrTimeout waiting for a connection", i, err)
			}
			if took > d+slack {
				t.Errorf("waiter %d took %v, deadline %v", i, took, d)
			}
		}()
	}
	time.Sleep(20 * time.Millisecond)
	// The waiters, the holders, the listener's accept loop; the runtime
	// may add a few of its own.
	if n, most := runtime.NumGoroutine(), before+waiters+2+1+3; n > most {
		t.Errorf("%d goroutines while %d callers wait, want at most %d", n, waiters, most)
	}
	wg.Wait()
	holders.Wait()
	if accepted := silent.Accepted(); accepted != 2 {
		t.Errorf("the server accepted %d connections; want max_conns=2", accepted)
	}
	st.Close()
	if n := silent.StillOpen(100 * time.Millisecond); n > 0 {
		t.Errorf("%d connections still open after Close", n)
	}
}

// TestCloseWakesWaiters closes a Conn (not a Store, which waits for its
// calls first) while a caller waits for its only connection: the waiter
// returns ErrClosed at once, the call in flight by its deadline, and
// nothing stays open.
func TestCloseWakesWaiters(t *testing.T) {
	silent := nettest.NewSilent(t)
	u, _ := url.Parse("memcached://" + silent.Addr() + "?max_conns=1")
	c, err := Driver{}.Open(driver.Config{URL: u, KeyPrefix: testPrefix(t), Timeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	holder := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		holder <- c.Ping(ctx)
	}()
	waitAccepted(t, silent, 1)
	waiter := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		waiter <- c.Ping(ctx)
	}()
	time.Sleep(20 * time.Millisecond)
	closed := time.Now()
	c.Close()
	select {
	case err := <-waiter:
		if !errors.Is(err, driver.ErrClosed) {
			t.Errorf("waiter: %v, want ErrClosed", err)
		}
		if d := time.Since(closed); d > 100*time.Millisecond {
			t.Errorf("waiter returned %v after Close", d)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("waiter still waiting 2s after Close")
	}
	if err := <-holder; !timedOut(err) {
		t.Errorf("call in flight during Close: %v, want a timeout (the Store's ErrTimeout)", err)
	}
	p := c.(*conn).pool
	if len(p.slots) != 0 || len(p.idle) != 0 {
		t.Errorf("after Close: %d connections in use, %d idle; want 0, 0", len(p.slots), len(p.idle))
	}
	if n := silent.StillOpen(100 * time.Millisecond); n > 0 {
		t.Errorf("%d connections still open after Close", n)
	}
}

// total is `stats` total_connections: the connections the server has
// accepted since it started.
func total(t *testing.T, s *testserver.StatsConn) int64 {
	t.Helper()
	n, ok := s.Stats(t, "")["total_connections"]
	if !ok {
		t.Fatal("stats: no total_connections")
	}
	return n
}

func waitAccepted(t *testing.T, s *nettest.Server, n int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		got := s.Accepted()
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server accepted %d connections in 2s, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// socketsTo counts the sockets this process holds connected to addr's
// port: the socket descriptors of /proc/self/fd whose peer (getpeername)
// has that port. A loopback dial connects at once, so a dial in progress
// is missed for microseconds at most. (/proc/net/tcp would name the peer
// too, but lists the whole network namespace: slow on a busy machine.)
func socketsTo(addr string) (int, error) {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return 0, err
	}
	names, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range names {
		link, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err != nil || !strings.HasPrefix(link, "socket:") {
			continue
		}
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		switch sa := peer(fd).(type) {
		case *syscall.SockaddrInet4:
			if sa.Port == port {
				n++
			}
		case *syscall.SockaddrInet6:
			if sa.Port == port {
				n++
			}
		}
	}
	return n, nil
}

func peer(fd int) syscall.Sockaddr {
	sa, err := syscall.Getpeername(fd)
	if err != nil {
		return nil
	}
	return sa
}

// timedOut reports an error the Store classifies as ErrTimeout: a deadline
// that passed, the context's or a socket's.
func timedOut(err error) bool {
	var ne net.Error
	return errors.Is(err, driver.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}
