package fleetstore_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/driver"
)

// fakeConn is a driver.Conn whose answers each test sets. It counts calls
// and records any call made after Close.
type fakeConn struct {
	hit     func(ctx context.Context, charges []driver.Charge, claim *driver.Claim) (driver.Result, error)
	commit  func(ctx context.Context, claims []driver.Claim) ([]error, error)
	release func(ctx context.Context, claims []driver.Claim) ([]error, error)
	other   func(ctx context.Context) error // Reset and Ping, and Peek when peek is nil
	peek    func(ctx context.Context, charges []driver.Charge) (driver.Result, error)

	calls      atomic.Int64 // every call but Close
	inFlight   atomic.Int64
	closed     atomic.Bool
	closes     atomic.Int64
	afterClose atomic.Int64
	// inFlightAtClose is how many calls were running when Close was called.
	inFlightAtClose atomic.Int64
}

var (
	_ driver.Conn   = (*fakeConn)(nil)
	_ driver.Peeker = (*fakeConn)(nil)
)

func (c *fakeConn) enter() func() {
	c.calls.Add(1)
	if c.closed.Load() {
		c.afterClose.Add(1)
	}
	c.inFlight.Add(1)
	return func() { c.inFlight.Add(-1) }
}

func (c *fakeConn) Hit(ctx context.Context, charges []driver.Charge, claim *driver.Claim) (driver.Result, error) {
	defer c.enter()()
	if c.hit == nil {
		return okResult(charges), nil
	}
	return c.hit(ctx, charges, claim)
}

func (c *fakeConn) Commit(ctx context.Context, claims []driver.Claim) ([]error, error) {
	defer c.enter()()
	if c.commit == nil {
		return make([]error, len(claims)), nil
	}
	return c.commit(ctx, claims)
}

func (c *fakeConn) Release(ctx context.Context, claims []driver.Claim) ([]error, error) {
	defer c.enter()()
	if c.release == nil {
		return make([]error, len(claims)), nil
	}
	return c.release(ctx, claims)
}

func (c *fakeConn) Reset(ctx context.Context, _ string) error {
	defer c.enter()()
	if c.other == nil {
		return nil
	}
	return c.other(ctx)
}

func (c *fakeConn) Ping(ctx context.Context) error {
	defer c.enter()()
	if c.other == nil {
		return nil
	}
	return c.other(ctx)
}

// Peek returns full buckets unless peek or other says otherwise.
func (c *fakeConn) Peek(ctx context.Context, charges []driver.Charge) (driver.Result, error) {
	defer c.enter()()
	switch {
	case c.peek != nil:
		return c.peek(ctx, charges)
	case c.other != nil:
		if err := c.other(ctx); err != nil {
			return driver.Result{}, err
		}
	}
	return driver.Result{NBuckets: len(charges)}, nil
}

func (c *fakeConn) Close() error {
	c.inFlightAtClose.Store(c.inFlight.Load())
	c.closes.Add(1)
	c.closed.Store(true)
	return nil
}

// fakeDriver hands out one fakeConn and records the Config it was given.
type fakeDriver struct {
	conn *fakeConn
	mu   sync.Mutex
	cfgs []driver.Config
}

func (d *fakeDriver) Open(cfg driver.Config) (driver.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cfgs = append(d.cfgs, cfg)
	return d.conn, nil
}

func (d *fakeDriver) lastConfig(t *testing.T) driver.Config {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.cfgs) == 0 {
		t.Fatal("driver never opened")
	}
	return d.cfgs[len(d.cfgs)-1]
}

var fakeSeq atomic.Int64

// registerFake registers a fresh scheme ("fakeN") for conn and returns it.
func registerFake(conn *fakeConn) (string, *fakeDriver) {
	d := &fakeDriver{conn: conn}
	scheme := fmt.Sprintf("fake%d", fakeSeq.Add(1))
	fleetstore.Register(scheme, d)
	return scheme, d
}

// openFake opens a Store on conn with OpenDriver: no scheme registered.
func openFake(t *testing.T, conn *fakeConn, opts ...fleetstore.Option) *fleetstore.Store {
	t.Helper()
	st, err := fleetstore.OpenDriver(&fakeDriver{conn: conn}, "fake://", opts...)
	if err != nil {
		t.Fatalf("open fake://: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func panicOf(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprint(r)
			if msg == "" {
				msg = "(empty panic)"
			}
		}
	}()
	f()
	return ""
}

func TestRegisterPanics(t *testing.T) {
	t.Parallel()
	fresh := fmt.Sprintf("fake-dup%d", fakeSeq.Add(1))
	if msg := panicOf(func() { fleetstore.Register(fresh, &fakeDriver{}) }); msg != "" {
		t.Fatalf("first Register(%q) panicked: %s", fresh, msg)
	}
	tests := []struct {
		name   string
		scheme string
		driver driver.Driver
	}{
		{name: "empty scheme", scheme: "", driver: &fakeDriver{}},
		{name: "nil driver", scheme: fmt.Sprintf("fake-nil%d", fakeSeq.Add(1)), driver: nil},
		{name: "duplicate", scheme: fresh, driver: &fakeDriver{}},
		{name: "duplicate memory", scheme: "memory", driver: &fakeDriver{}},
		{name: "space in scheme", scheme: "has space", driver: &fakeDriver{}},
		{name: "upper case scheme", scheme: "Redis", driver: &fakeDriver{}},
		{name: "digit first", scheme: "9p", driver: &fakeDriver{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg := panicOf(func() { fleetstore.Register(tt.scheme, tt.driver) })
			if msg == "" {
				t.Fatalf("Register(%q, %v) did not panic", tt.scheme, tt.driver)
			}
			if !strings.HasPrefix(msg, "fleetstore: ") {
				t.Errorf("panic %q, want it to start with \"fleetstore: \"", msg)
			}
		})
	}
	// A failed Register registers nothing.
	for _, s := range fleetstore.Drivers() {
		if s == "" || strings.HasPrefix(s, "fake-nil") {
			t.Errorf("Drivers() lists %q after a panicking Register", s)
		}
	}
}

func TestDrivers(t *testing.T) {
	t.Parallel()
	scheme, _ := registerFake(&fakeConn{})
	got := fleetstore.Drivers()
	if !slices.IsSorted(got) {
		t.Errorf("Drivers() = %q, not sorted", got)
	}
	for _, want := range []string{"memory", scheme} {
		if !slices.Contains(got, want) {
			t.Errorf("Drivers() = %q, want it to include %q", got, want)
		}
	}
	if n := len(slices.Compact(slices.Clone(got))); n != len(got) {
		t.Errorf("Drivers() = %q has duplicates", got)
	}
	// The slice is the caller's: changing it changes nothing registered.
	got[0] = "zzz-not-registered"
	if slices.Contains(fleetstore.Drivers(), "zzz-not-registered") {
		t.Error("Drivers() returns the registry's own slice")
	}
	// This test binary imports no driver package: only memory and the
	// test's own fakes are registered.
	for _, s := range fleetstore.Drivers() {
		if s != "memory" && !strings.HasPrefix(s, "fake") && !strings.HasPrefix(s, "memtest") {
			t.Errorf("unexpected scheme %q registered in the root test binary", s)
		}
	}
}
