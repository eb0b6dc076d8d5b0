package valkey

import (
	"context"
	"io"
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
// server's replies are held back (dropped); Closed counts connections the
// client side closed.
type proxy struct {
	ln     net.Listener
	target string
	stall  atomic.Bool
	hangUp atomic.Bool // the next reply is dropped and both sides closed
	closed atomic.Int32
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  []net.Conn
}

func startProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(p.close)
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		p.wg.Add(2)
		go func() {
			defer p.wg.Done()
			_, _ = io.Copy(s, c) // ends when the client closes
			p.closed.Add(1)
			s.Close()
		}()
		go func() {
			defer p.wg.Done()
			buf := make([]byte, 32<<10)
			for {
				n, err := s.Read(buf)
				if n > 0 && p.hangUp.Load() {
					s.Close()
					break
				}
				if n > 0 && !p.stall.Load() {
					if _, err := c.Write(buf[:n]); err != nil {
						break
					}
				}
				if err != nil {
					break
				}
			}
			c.Close()
		}()
	}
}

func (p *proxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
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
