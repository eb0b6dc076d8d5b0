package valkey

import (
	"context"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valkey-io/valkey-go"
	"go.uber.org/zap"

	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/internal/testserver"
	"github.com/fleetstore/fleetstore/nettest"
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

// proxy forwards TCP connections to target. While DropReplies is on the
// server's replies are held back (dropped); while hangUp is set a reply is
// dropped and both sides of its connection are closed.
type proxy struct {
	*nettest.Proxy
	hangUp atomic.Bool
}

func startProxy(t *testing.T, target string) *proxy {
	t.Helper()
	p := &proxy{}
	p.Proxy = nettest.NewProxy(t, target, func() nettest.ReplyFilter { return p.filter })
	return p
}

func (p *proxy) filter(chunk []byte) ([]byte, bool) {
	if p.hangUp.Load() {
		return nil, true
	}
	return chunk, false
}

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
