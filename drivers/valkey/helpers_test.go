package valkey

import (
	"context"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/internal/rediscore"
	"github.com/fleetstore/fleetstore/internal/scripts"
	"github.com/fleetstore/fleetstore/internal/testing/batcherr"
	"github.com/fleetstore/fleetstore/internal/testing/testserver"
	"github.com/fleetstore/fleetstore/nettest"
)

// slack is added to a budget when a test checks how long a call took: a
// loaded machine under -race is late to run the caller's goroutine.
const slack = 60 * time.Millisecond

// testConn opens a Store on raw through this driver with the store
// timeout, after undo (when not nil) has changed the client options the
// driver chose: the teeth of the settings tests. The Store classifies the
// driver's errors (CONTRACT §1), as it does for users.
func testConn(t *testing.T, raw string, timeout time.Duration, undo func(*valkey.ClientOption)) *tconn {
	t.Helper()
	return testConnPrefixed(t, raw, "vt"+randName(), timeout, undo)
}

// testConnPrefixed is testConn with the given key prefix.
func testConnPrefixed(t *testing.T, raw, prefix string, timeout time.Duration, undo func(*valkey.ClientOption)) *tconn {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("key_prefix", prefix)
	u.RawQuery = q.Encode()
	d := &undoDriver{undo: undo}
	st, err := fleetstore.OpenDriver(d, u.String(), fleetstore.WithTimeout(timeout))
	if err != nil {
		t.Fatalf("open %s: %v", raw, err)
	}
	t.Cleanup(func() { st.Close() })
	return &tconn{Store: st, core: d.conn}
}

// undoDriver is Driver with undo applied to the client options.
type undoDriver struct {
	undo func(*valkey.ClientOption)
	conn *rediscore.Conn
}

func (d *undoDriver) Open(cfg driver.Config) (driver.Conn, error) {
	o, err := parseURL(cfg)
	if err != nil {
		return nil, err
	}
	if d.undo != nil {
		d.undo(&o.client)
	}
	d.conn = newConn(cfg, o)
	return d.conn, nil
}

// tconn is a Store on this driver and the driver's Conn under it, for the
// tests that look inside.
type tconn struct {
	*fleetstore.Store
	core *rediscore.Conn
}

// Commit is Store.Commit with one result per claim, as the driver's.
func (c *tconn) Commit(ctx context.Context, claims []driver.Claim) ([]error, error) {
	return batcherr.Split(c.Store.Commit(ctx, claims...), len(claims))
}

// Release is Store.Release with one result per claim, as the driver's.
func (c *tconn) Release(ctx context.Context, claims []driver.Claim) ([]error, error) {
	return batcherr.Split(c.Store.Release(ctx, claims...), len(claims))
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

// lazyOf returns the lazy valkey-go client under c.
func lazyOf(c *tconn) *lazyClient {
	return c.core.Client().(*client).lazy
}

// first is a batch settle's whole-call error, else its first claim's.
func first(errs []error, err error) error {
	if err != nil {
		return err
	}
	return errs[0]
}

// each(t)(c.Commit(…)) is a batch settle's per-claim errors; a
// whole-call error fails t.
func each(t *testing.T) func(errs []error, err error) []error {
	return func(errs []error, err error) []error {
		t.Helper()
		if err != nil {
			t.Fatalf("batch settle failed as a whole: %v", err)
		}
		return errs
	}
}

// waitLibrary waits until each of nodes holds the scripts' function
// library, which the driver loads in the background once a call finds it
// missing (that call runs with EVAL).
func waitLibrary(t testing.TB, nodes ...*testserver.Redis) {
	t.Helper()
	if err := testserver.WaitLibrary(scripts.Library.Name, 10*time.Second, nodes...); err != nil {
		t.Fatal(err)
	}
}
