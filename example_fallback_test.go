package fleetstore_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/gcra"
)

// A node of a fleet of 4 whose shared store is down decides from its own
// state, at a quarter of each limit, and queues its commits for the
// store's return.
func ExampleWithFallback() {
	ctx := context.Background()
	// fallback_nodes=4 in the URL, or WithFallback(Fallback{Nodes: 4}).
	store, err := fleetstore.OpenDriver(downDriver{}, "down://cache:6379?fallback_nodes=4",
		fleetstore.WithFallback(fleetstore.Fallback{
			OnConflict: func(c fleetstore.Conflict) { fmt.Println("stored twice:", c.Claim.HookID, c.Holder) },
		}))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Close()

	// 10 hooks per second with a burst of 20, fleet-wide.
	inc, capacity, _ := gcra.Rate(10, time.Second, 20)
	charges := []fleetstore.Charge{{Kind: fleetstore.Hooks, Tenant: "acme", Increment: inc, Capacity: capacity}}
	claim := fleetstore.Claim{
		Tenant: "acme", SourceID: "github", Key: "72d3162e-cc78-11e3-81ab-4c9367dc0958",
		HookID: "hook-1", Node: "edge-1", TTL: 24 * time.Hour, PendingTTL: 30 * time.Second,
	}
	res, err := store.Hit(ctx, charges, &claim)
	fmt.Println("hit:", res.Outcome, "local:", res.Local, err)
	// Queued for the store's return, and committed here.
	fmt.Println("commit:", store.Commit(ctx, claim))

	retry := claim
	retry.HookID = "hook-2"
	res, _ = store.Hit(ctx, charges, &retry)
	fmt.Println("redelivery here:", res.Outcome, "of", res.HookID)

	// This node's share of the burst of 20 is 5: it has taken one.
	admitted := 1
	for range 10 {
		if res, _ := store.Hit(ctx, charges, nil); res.Outcome == fleetstore.OK {
			admitted++
		}
	}
	fmt.Println("admitted of 11:", admitted)

	s := store.FallbackStats()
	fmt.Println("degraded:", s.Degraded, "outbox:", s.Outbox)
	// Output:
	// hit: ok local: true <nil>
	// commit: <nil>
	// redelivery here: duplicate of hook-1
	// admitted of 11: 5
	// degraded: true outbox: 1
}

// downDriver is a store whose server is down: every call is refused.
type downDriver struct{}

func (downDriver) Open(driver.Config) (driver.Conn, error) { return downConn{}, nil }

type downConn struct{}

var errRefused = errors.New("dial tcp 10.0.0.7:6379: connect: connection refused")

func (downConn) Hit(context.Context, []driver.Charge, *driver.Claim) (driver.Result, error) {
	return driver.Result{}, errRefused
}
func (downConn) Commit(context.Context, []driver.Claim) ([]error, error)  { return nil, errRefused }
func (downConn) Release(context.Context, []driver.Claim) ([]error, error) { return nil, errRefused }
func (downConn) Reset(context.Context, string) error                      { return errRefused }
func (downConn) Ping(context.Context) error                               { return errRefused }
func (downConn) Close() error                                             { return nil }
