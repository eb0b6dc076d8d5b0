package redis

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/internal/testing/testserver"
	"github.com/fleetstore/fleetstore/nettest"
)

// The client settings the contract needs, each with a test that fails
// without it.

var schemes atomic.Int32

// dialerScheme registers a driver that opens scheme's URLs (redis or
// redis+cluster) with dial instead of go-redis's dialer, under a new
// scheme of its own, and returns that scheme.
func dialerScheme(scheme string, dial dialFunc) string {
	name := "redis-test-" + strconv.Itoa(int(schemes.Add(1)))
	fleetstore.Register(name, dialDriver{scheme: scheme, dial: dial})
	return name
}

type dialDriver struct {
	scheme string
	dial   dialFunc
}

func (d dialDriver) Open(cfg driver.Config) (driver.Conn, error) {
	u := *cfg.URL
	u.Scheme = d.scheme
	cfg.URL = &u
	c, err := open(cfg, d.dial)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// lossy dials real connections that, while armed, lose the reply to a
// script call (FCALL or EVALSHA): the command reaches the server and runs,
// then the connection reads EOF, as when the server or the network drops
// it.
type lossy struct {
	armed atomic.Int32 // replies still to lose
	lost  atomic.Int32 // replies lost
	batch int          // lose only the reply to a write of at least this many script calls (0: one)
}

// scriptCalls counts the FCALL and EVALSHA commands in b, as go-redis
// writes them (RESP, the command name in lower case).
func scriptCalls(b []byte) int {
	return bytes.Count(b, []byte("\r\nfcall\r\n")) + bytes.Count(b, []byte("\r\nevalsha\r\n"))
}

func (l *lossy) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &lossyConn{Conn: c, l: l}, nil
}

type lossyConn struct {
	net.Conn
	l    *lossy
	dead atomic.Bool
}

func (c *lossyConn) Write(b []byte) (int, error) {
	if c.dead.Load() {
		return 0, io.EOF
	}
	n, err := c.Conn.Write(b)
	if err == nil && scriptCalls(b) >= max(c.l.batch, 1) && c.l.armed.Add(-1) >= 0 {
		time.Sleep(100 * time.Millisecond) // the script runs
		c.dead.Store(true)
		c.Conn.Close()
		c.l.lost.Add(1)
	}
	return n, err
}

func (c *lossyConn) Read(b []byte) (int, error) {
	if c.dead.Load() {
		return 0, io.EOF
	}
	return c.Conn.Read(b)
}

// TestNoRetryOfLostReply: a Hit whose reply is lost after the script ran
// fails, and is not re-sent by the client: the bucket is charged once
// (CONTRACT T5). Fails with go-redis's default MaxRetries (3) on a single
// server, and without the noRetry command on a cluster.
func TestNoRetryOfLostReply(t *testing.T) {
	t.Parallel()
	t.Run("server", func(t *testing.T) {
		t.Parallel()
		srv := testserver.StartRedis(t)
		testNoRetry(t, "redis", srv.URL(), srv)
	})
	t.Run("cluster", func(t *testing.T) {
		t.Parallel()
		cl := testserver.StartCluster(t)
		testNoRetry(t, "redis+cluster", cl.URL(), cl.Nodes...)
	})
}

func testNoRetry(t *testing.T, scheme, raw string, nodes ...*testserver.Redis) {
	l := &lossy{}
	scheme = dialerScheme(scheme, l.dial)
	_, rest, _ := cutScheme(raw)
	st, _ := openStore(t, scheme+"://"+rest)
	c := fleetstore.Charge{Kind: "hooks", Tenant: "t-" + randHex(4), Increment: time.Hour, Capacity: 3 * time.Hour}
	if _, err := st.Hit(ctx(t), []fleetstore.Charge{c}, nil); err != nil { // connect, load the library
		t.Fatalf("first hit: %v", err)
	}
	waitLibrary(t, nodes...)
	l.armed.Store(1)
	_, err := st.Hit(ctx(t), []fleetstore.Charge{c}, nil)
	if l.lost.Load() != 1 {
		t.Fatalf("lost %d replies, want 1", l.lost.Load())
	}
	if err == nil {
		t.Fatal("hit whose reply was lost: got no error: the client re-sent the script")
	}
	wantErrIs(t, "lost reply", err, fleetstore.ErrUnavailable)
	// Burst 3: the first hit and the lost one took two; one is left.
	if ok := conforming(t, st, []fleetstore.Charge{c}, 3); ok != 1 {
		t.Fatalf("%d hits conformed after the lost one, want 1 (the lost hit was charged %d times)", ok, 2-ok)
	}
}

func cutScheme(raw string) (scheme, rest string, ok bool) {
	i := bytes.Index([]byte(raw), []byte("://"))
	if i < 0 {
		return "", raw, false
	}
	return raw[:i], raw[i+3:], true
}

// TestContextDeadlineReachesSocket: a caller's deadline shorter than the
// store's timeout ends the call on time against a server that never
// answers (T1). Fails without ContextTimeoutEnabled: go-redis would wait
// for its read timeout, the store's 5s.
func TestContextDeadlineReachesSocket(t *testing.T) {
	t.Parallel()
	st, _ := openStore(t, "redis://"+nettest.NewSilent(t).Addr()) // budget 5s
	c, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := st.Hit(c, []fleetstore.Charge{{Kind: "hooks", Tenant: "t", Increment: time.Second, Capacity: time.Second}}, nil)
	took := time.Since(start)
	wantErrIs(t, "silent server", err, fleetstore.ErrTimeout)
	if took > 1500*time.Millisecond {
		t.Fatalf("hit took %v with a 200ms deadline", took)
	}
}

// TestRefusedFailsAtOnce: a refused connection is ErrUnavailable at once,
// not after go-redis's dial retries (T2). Fails with the default
// DialerRetries (5 attempts, 100ms apart).
func TestRefusedFailsAtOnce(t *testing.T) {
	t.Parallel()
	addr := nettest.RefusedAddr(t)
	st, _ := openStore(t, "redis://"+addr)
	for range 3 {
		start := time.Now()
		err := st.Ping(ctx(t))
		took := time.Since(start)
		wantErrIs(t, "refused", err, fleetstore.ErrUnavailable)
		if took > 300*time.Millisecond {
			t.Fatalf("refused connection took %v to fail", took)
		}
	}
}

// TestDialEndsWithBudget: no goroutine outlives a timed-out call by more
// than the budget, and none outlives Close by much (T4). Once pool_size
// dials have failed, go-redis probes the server from a goroutine of its
// own, one dial of DialTimeout each, a second apart, until Close. Fails
// with go-redis's default dial timeout (5s): that probe is still dialing
// the black hole long after Close.
func TestDialEndsWithBudget(t *testing.T) {
	addr := nettest.BlackHole(t)
	before := runtime.NumGoroutine()
	st, err := fleetstore.Open("redis://" + addr + "?timeout=200ms&pool_size=2")
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		start := time.Now()
		err = st.Ping(context.Background())
		wantErrIs(t, "black hole", err, fleetstore.ErrTimeout)
		if took := time.Since(start); took > time.Second {
			t.Fatalf("ping took %v with a 200ms budget", took)
		}
	}
	st.Close()
	// The probe sleeps 1s between dials: 1s + 200ms + slack.
	deadline := time.Now().Add(2500 * time.Millisecond)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<16)
		t.Fatalf("%d goroutines 2.5s after Close, %d before Open:\n%s", n, before, buf[:runtime.Stack(buf, true)])
	}
}

// TestOpenDialsNothing: Open makes no connection; the first call does
// (T3).
func TestOpenDialsNothing(t *testing.T) {
	t.Parallel()
	l := nettest.NewHangUp(t)
	for _, raw := range []string{"redis://" + l.Addr(), "redis+cluster://" + l.Addr()} {
		start := time.Now()
		st, err := fleetstore.Open(raw)
		if err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took > 50*time.Millisecond {
			t.Errorf("open took %v", took)
		}
		time.Sleep(200 * time.Millisecond)
		if n := l.Accepted(); n != 0 {
			t.Fatalf("%s: %d connections after Open, before any call", raw, n)
		}
		st.Close()
	}
	st, _ := openStore(t, "redis://"+l.Addr())
	_ = st.Ping(ctx(t))
	if l.Accepted() == 0 {
		t.Fatal("the first call made no connection: the test proves nothing")
	}
}

var _ = errors.Is
