package valkey

import (
	"context"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valkey-io/valkey-go"
	"go.uber.org/zap"

	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/internal/testserver"
)

// slack is added to a budget when a test checks how long a call took: a
// loaded machine under -race is late to run the caller's goroutine.
const slack = 60 * time.Millisecond

// testConn opens a driver.Conn on raw with the store timeout, after
// undo (when not nil) has changed the client options the driver chose:
// the teeth of the settings tests. Calls on it carry no Store budget:
// callers pass a context with a deadline.
func testConn(t *testing.T, raw string, timeout time.Duration, undo func(*valkey.ClientOption)) driver.Conn {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	cfg := driver.Config{URL: u, KeyPrefix: "vt" + randName(), Timeout: timeout, Logger: zap.NewNop()}
	o, err := parseURL(cfg)
	if err != nil {
		t.Fatalf("parse %s: %v", raw, err)
	}
	if undo != nil {
		undo(&o.client)
	}
	c := newConn(cfg, o)
	t.Cleanup(func() { c.Close() })
	return c
}

func randName() string {
	return time.Now().Format("150405.000000000")
}

func budget(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func hooks(tenant string, inc, capacity time.Duration) []driver.Charge {
	return []driver.Charge{{Kind: driver.Hooks, Tenant: tenant, Increment: inc, Capacity: capacity}}
}

// proxy forwards TCP connections to target. While stall is set the
// server's replies are held back (dropped); while hangUp is set a reply is
// dropped and both sides of its connection are closed.
type proxy struct {
	*testserver.Proxy
	stall  atomic.Bool
	hangUp atomic.Bool
}

func startProxy(t *testing.T, target string) *proxy {
	t.Helper()
	p := &proxy{}
	p.Proxy = testserver.StartProxy(t, target, func() testserver.ReplyFilter { return p.filter })
	return p
}

func (p *proxy) filter(chunk []byte) ([]byte, bool) {
	switch {
	case p.hangUp.Load():
		return nil, true
	case p.stall.Load():
		return nil, false
	}
	return chunk, false
}

// listener accepts connections, counts them and, when hangUp is set,
// closes each at once; otherwise it holds them open and never answers.
type listener struct {
	ln       net.Listener
	accepted atomic.Int32
	mu       sync.Mutex
	conns    []net.Conn
}

func startListener(t *testing.T, hangUp bool) *listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &listener{ln: ln}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			l.accepted.Add(1)
			if hangUp {
				c.Close()
				continue
			}
			l.mu.Lock()
			l.conns = append(l.conns, c)
			l.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		l.mu.Lock()
		for _, c := range l.conns {
			c.Close()
		}
		l.mu.Unlock()
	})
	return l
}

func (l *listener) addr() string { return l.ln.Addr().String() }

// freePorts returns n loopback ports that were free a moment ago.
func freePorts(t *testing.T, n int) []int {
	ports := make([]int, n)
	for i := range ports {
		ports[i] = testserver.FreePort(t)
	}
	return ports
}

// isBuilding reports whether a build of the client is running.
func (l *lazyClient) isBuilding() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.building != nil
}
