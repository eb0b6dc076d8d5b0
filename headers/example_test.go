package headers_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/calendar"
	"github.com/fleetstore/fleetstore/drivers/memory"
	"github.com/fleetstore/fleetstore/headers"
)

// A tenant's burst, as its sender sees it: the RateLimit fields count
// down, t says when one more hook will fit, and the hook over the burst is
// told to come back then.
func ExampleWrite() {
	store, err := fleetstore.Open("memory://")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Close()
	// Built once, at start-up: 1 hook an hour, a burst of 2.
	hooks := fleetstore.MustLimit(fleetstore.NewLimit(fleetstore.Hooks, 1, time.Hour, 2))
	limits := []fleetstore.Limit{hooks}

	for range 3 {
		res, _ := store.Hit(context.Background(), []fleetstore.Charge{hooks.Charge("acme", 1)}, nil)
		w := httptest.NewRecorder()
		headers.Write(w.Header(), &res, limits, headers.Options{})
		fmt.Printf("%s: RateLimit: %s; Retry-After: %q\n", res.Outcome, w.Header().Get("RateLimit"), w.Header().Get("Retry-After"))
	}
	// Output:
	// ok: RateLimit: "hooks";r=1;t=3600; Retry-After: ""
	// ok: RateLimit: "hooks";r=0;t=3600; Retry-After: ""
	// rate_limited: RateLimit: "hooks";r=0;t=3600; Retry-After: "3600"
}

// A plan of 10 hooks a second and 10 000 a month: the quota is a policy
// of its own, w the month's length in seconds (April: 30 days) and t the
// seconds left in it. The store and the charge read one clock here, 30
// April 00:00 UTC.
func ExampleWrite_quota() {
	at := time.Date(2027, 4, 30, 0, 0, 0, 0, time.UTC)
	store, err := fleetstore.OpenDriver(memory.New(func() int64 { return at.UnixMicro() }), "memory://")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Close()
	hooks := fleetstore.MustLimit(fleetstore.PerSecond(fleetstore.Hooks, 10, 10))
	month := fleetstore.MustLimit(fleetstore.NewQuota("hooks_month", 10_000, calendar.Month, time.UTC))
	plan := fleetstore.Plan{hooks, month}

	charges := []fleetstore.Charge{hooks.ChargeAt("acme", 1, at), month.ChargeAt("acme", 1, at)}
	res, _ := store.Hit(context.Background(), charges, nil)
	w := httptest.NewRecorder()
	headers.Write(w.Header(), &res, plan, headers.Options{Now: func() time.Time { return at }})
	fmt.Println("RateLimit-Policy:", w.Header().Get("RateLimit-Policy"))
	fmt.Println("RateLimit:", w.Header().Get("RateLimit"))
	// Output:
	// RateLimit-Policy: "hooks";q=10;w=1, "hooks_month";q=10000;w=2592000
	// RateLimit: "hooks";r=9;t=1, "hooks_month";r=9999;t=86400
}
