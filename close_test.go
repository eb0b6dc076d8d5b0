package fleetstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/driver"
)

// A call made while Close waits for a call in flight returns ErrClosed at
// once: it must not queue behind Close past its own deadline (T1, T6).
func TestCallDuringCloseDoesNotWait(t *testing.T) {
	started := make(chan struct{})
	release := make(chan struct{})
	conn := &fakeConn{hit: func(ctx context.Context, charges []driver.Charge, _ *driver.Claim) (driver.Result, error) {
		close(started)
		<-release // the call in flight ends when the test says so
		return okResult(charges), nil
	}}
	st := openFake(t, conn, fleetstore.WithTimeout(time.Minute))
	c := fleetstore.Charge{Kind: fleetstore.Hooks, Tenant: "t", Increment: time.Second, Capacity: time.Second}
	hitDone := make(chan error, 1)
	go func() {
		_, err := st.Hit(context.Background(), []fleetstore.Charge{c}, nil)
		hitDone <- err
	}()
	<-started
	closeDone := make(chan error, 1)
	go func() { closeDone <- st.Close() }()

	// Close is now waiting for the Hit. A new call must not wait for it.
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := st.Ping(context.Background())
		if errors.Is(err, fleetstore.ErrClosed) {
			break
		}
		if err != nil {
			t.Fatalf("ping while closing: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatal("Close never marked the Store closed")
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case err := <-closeDone:
		t.Fatalf("Close returned (%v) with a call still in flight", err)
	default:
	}
	if conn.closes.Load() != 0 {
		t.Fatal("driver closed with a call in flight")
	}
	close(release)
	if err := <-hitDone; err != nil {
		t.Fatalf("the call in flight: %v", err)
	}
	if err := <-closeDone; err != nil {
		t.Fatalf("close: %v", err)
	}
	if conn.closes.Load() != 1 || conn.afterClose.Load() != 0 {
		t.Fatalf("driver closes %d (want 1), calls after close %d (want 0)", conn.closes.Load(), conn.afterClose.Load())
	}
}
