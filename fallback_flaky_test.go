package fleetstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/drivers/memory"
	"github.com/fleetstore/fleetstore/internal/testing/degradedtest"
)

// The failure modes of a flaky shared store.
const (
	healthy  int32 = iota
	refused        // every call fails at once: connection refused (ErrUnavailable)
	silent         // every call waits for its deadline (ErrTimeout)
	replying       // every call gets an error reply (ErrUnavailable, the server answered)
)

// flakyDriver is a shared store for the fallback's unit tests: the memory
// driver's named state (real GCRA and claims, readable through a plain
// Store on the same memory driver) behind a switch that makes every call
// fail as a server in trouble does. The fault suite (faults/) does the
// same with real servers; these tests need a switch and exact counts.
type flakyDriver struct {
	mem  *memory.Driver
	mode atomic.Int32

	hits, commits, pings, peeks atomic.Int64 // calls that reached the switch
	pingsInFlight               atomic.Int64
	maxPingsInFlight            atomic.Int64
	pingGate                    atomic.Pointer[chan struct{}] // when set, Ping waits for it to close
	// commitErr, when set, is each claim's result of a healthy Commit
	// (the claim is settled only when it returns nil).
	commitErr atomic.Pointer[func(driver.Claim) error]
	// settleAtMost, when positive, is how many claims of a healthy batch
	// Commit settles before its deadline "passes" for the rest (a driver
	// that settles claim by claim on a slow machine).
	settleAtMost atomic.Int64
}

func newFlaky() *flakyDriver { return &flakyDriver{mem: memory.New(nil)} }

func (d *flakyDriver) set(mode int32) { d.mode.Store(mode) }

func (d *flakyDriver) Open(cfg driver.Config) (driver.Conn, error) {
	inner, err := d.mem.Open(cfg)
	if err != nil {
		return nil, err
	}
	return &flakyConn{d: d, inner: inner}, nil
}

// flakyConn is not driver.NonBlocking: the Store arms its budget.
type flakyConn struct {
	d     *flakyDriver
	inner driver.Conn
}

func (c *flakyConn) fail(ctx context.Context) error {
	switch c.d.mode.Load() {
	case refused:
		return fmt.Errorf("dial tcp 127.0.0.1:1: %w", syscall.ECONNREFUSED)
	case silent:
		<-ctx.Done()
		return ctx.Err()
	case replying:
		return driver.ErrorReply(errors.New("LOADING the server is loading its dataset"))
	}
	return nil
}

func (c *flakyConn) Hit(ctx context.Context, charges []driver.Charge, claim *driver.Claim) (driver.Result, error) {
	c.d.hits.Add(1)
	if err := c.fail(ctx); err != nil {
		return driver.Result{}, err
	}
	return c.inner.Hit(ctx, charges, claim)
}

func (c *flakyConn) Peek(ctx context.Context, charges []driver.Charge) (driver.Result, error) {
	c.d.peeks.Add(1)
	if err := c.fail(ctx); err != nil {
		return driver.Result{}, err
	}
	return c.inner.(driver.Peeker).Peek(ctx, charges)
}

func (c *flakyConn) Commit(ctx context.Context, claims []driver.Claim) ([]error, error) {
	c.d.commits.Add(1)
	if err := c.fail(ctx); err != nil {
		return nil, err
	}
	if n := int(c.d.settleAtMost.Load()); n > 0 && len(claims) > n {
		errs, err := c.inner.Commit(ctx, claims[:n])
		if err != nil {
			return nil, err
		}
		for range claims[n:] {
			errs = append(errs, fmt.Errorf("settle: %w", context.DeadlineExceeded))
		}
		return errs, nil
	}
	if f := c.d.commitErr.Load(); f != nil {
		errs := make([]error, len(claims))
		var good []driver.Claim
		for i, cl := range claims {
			if errs[i] = (*f)(cl); errs[i] == nil {
				good = append(good, cl)
			}
		}
		if len(good) > 0 {
			if _, err := c.inner.Commit(ctx, good); err != nil {
				return nil, err
			}
		}
		return errs, nil
	}
	return c.inner.Commit(ctx, claims)
}

func (c *flakyConn) Release(ctx context.Context, claims []driver.Claim) ([]error, error) {
	if err := c.fail(ctx); err != nil {
		return nil, err
	}
	return c.inner.Release(ctx, claims)
}

func (c *flakyConn) Reset(ctx context.Context, tenant string) error {
	if err := c.fail(ctx); err != nil {
		return err
	}
	return c.inner.Reset(ctx, tenant)
}

func (c *flakyConn) Ping(ctx context.Context) error {
	c.d.pings.Add(1)
	n := c.d.pingsInFlight.Add(1)
	defer c.d.pingsInFlight.Add(-1)
	for {
		m := c.d.maxPingsInFlight.Load()
		if n <= m || c.d.maxPingsInFlight.CompareAndSwap(m, n) {
			break
		}
	}
	if g := c.d.pingGate.Load(); g != nil {
		select {
		case <-*g:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return c.fail(ctx)
}

func (c *flakyConn) Close() error { return c.inner.Close() }

var flakySeq atomic.Int64

// flakyStore is a Store with a fallback on a flaky shared store, and a
// plain Store on the same shared state to read it back.
type flakyStore struct {
	*fleetstore.Store
	d      *flakyDriver
	shared *fleetstore.Store // the shared state, no fallback, no switch
	name   string            // of the shared state on d.mem
	logs   *observer.ObservedLogs
}

// openFlaky opens a Store with fb (Nodes 2 when fb has no share) on a
// fresh flaky shared store, its budget 200ms unless opts say otherwise.
func openFlaky(t *testing.T, fb fleetstore.Fallback, opts ...fleetstore.Option) *flakyStore {
	t.Helper()
	d := newFlaky()
	return openOnFlaky(t, d, fmt.Sprintf("flaky-%d", flakySeq.Add(1)), fb, opts...)
}

// openOnFlaky opens a node on d's shared state name: nodes of one fleet.
func openOnFlaky(t *testing.T, d *flakyDriver, name string, fb fleetstore.Fallback, opts ...fleetstore.Option) *flakyStore {
	t.Helper()
	if fb.Nodes == 0 && fb.Share == 0 {
		fb.Nodes = 2
	}
	core, logs := observer.New(zapcore.InfoLevel)
	opts = append([]fleetstore.Option{fleetstore.WithTimeout(200 * time.Millisecond), fleetstore.WithLogger(zap.New(core)), fleetstore.WithFallback(fb)}, opts...)
	st, err := fleetstore.OpenDriver(d, "memory://"+name, opts...)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	shared, err := fleetstore.OpenDriver(d.mem, "memory://"+name)
	if err != nil {
		t.Fatalf("open shared view: %v", err)
	}
	t.Cleanup(func() { shared.Close() })
	return &flakyStore{Store: st, d: d, shared: shared, name: name, logs: logs}
}

// waitFor polls cond every ms for up to d and reports whether it came true.
var waitFor = degradedtest.WaitFor

// logCount counts log lines whose message contains substr.
func logCount(logs *observer.ObservedLogs, substr string) int {
	n := 0
	for _, e := range logs.All() {
		if strings.Contains(e.Message, substr) {
			n++
		}
	}
	return n
}

// hookClaim is a claim on key by hook for tenant acme.
func hookClaim(key, hook string) fleetstore.Claim {
	return fleetstore.Claim{Tenant: "acme", SourceID: "github", Key: key, HookID: hook, Node: "node-a", TTL: time.Hour, PendingTTL: time.Minute}
}

// bigCharge conforms for as long as any test runs.
var bigCharge = fleetstore.Charge{Kind: fleetstore.Hooks, Tenant: "acme", Increment: time.Microsecond, Capacity: time.Hour}
