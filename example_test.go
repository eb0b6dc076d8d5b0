package fleetstore_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/headers"
)

func ExampleOpen() {
	// The memory driver is built in; other drivers are blank-imported,
	// e.g. _ "github.com/fleetstore/fleetstore/drivers/redis".
	store, err := fleetstore.Open("memory://example-open?timeout=50ms")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Close()
	fmt.Println("ping:", store.Ping(context.Background()))

	// A scheme whose driver was not imported.
	_, err = fleetstore.Open("redis://cache:6379/0")
	fmt.Println("unknown scheme:", errors.Is(err, fleetstore.ErrUnknownScheme))

	// A parameter the driver does not know.
	_, err = fleetstore.Open("memory://?foo=1")
	fmt.Println(err)
	// Output:
	// ping: <nil>
	// unknown scheme: true
	// fleetstore: open: invalid url: foo: unknown parameter (accepted: timeout, key_prefix, fallback_nodes, fallback_share, fallback_outbox, fallback_claims, fallback_recent, fallback_outbox_dir)
}

// A webhook edge handles a delivery: Hit charges the tenant's hooks and
// bytes buckets and claims the provider's event id in one round trip; the
// hook is stored durably; Commit settles the claim.
func ExampleStore_Hit() {
	ctx := context.Background()
	store, err := fleetstore.Open("memory://")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Close()

	// 10 hooks per second with a burst of 20; 1 MiB per second with a
	// burst of 1 MiB: built once, at start-up.
	hooks := fleetstore.MustLimit(fleetstore.PerSecond(fleetstore.Hooks, 10, 20))
	bytes := fleetstore.MustLimit(fleetstore.NewByteLimit(fleetstore.Bytes, 1<<20, 1<<20))
	body := []byte(`{"action":"opened"}`)
	charges := []fleetstore.Charge{hooks.Charge("acme", 1), bytes.Charge("acme", int64(len(body)))}
	claim := fleetstore.Claim{
		Tenant: "acme", SourceID: "github", Key: "72d3162e-cc78-11e3-81ab-4c9367dc0958",
		HookID: "hook-1", Node: "edge-1",
		TTL: 24 * time.Hour, PendingTTL: 30 * time.Second,
	}

	res, err := store.Hit(ctx, charges, &claim)
	fmt.Println("first delivery:", res.Outcome, err)
	fmt.Println("left:", hooks.Remaining(res.Quota()[0]), "hooks,", bytes.Remaining(res.Quota()[1]), "bytes")

	// While hook-1 is being stored, the provider delivers the event again.
	again := claim
	again.HookID = "hook-2"
	res, _ = store.Hit(ctx, charges, &again)
	fmt.Println("concurrent redelivery:", res.Outcome, "retry after", res.RetryAfter.Round(time.Second))

	// hook-1 is stored durably (a queue, a database), then committed.
	fmt.Println("commit:", store.Commit(ctx, claim))

	// A later redelivery is a duplicate of hook-1.
	again.HookID = "hook-3"
	res, _ = store.Hit(ctx, charges, &again)
	fmt.Println("later redelivery:", res.Outcome, "of", res.HookID)

	// A tenant allowed one hook per hour gets the second one rate-limited.
	slow := []fleetstore.Charge{{Kind: fleetstore.Hooks, Tenant: "slow", Increment: time.Hour, Capacity: time.Hour}}
	res, _ = store.Hit(ctx, slow, nil)
	fmt.Println("slow tenant, first:", res.Outcome)
	res, _ = store.Hit(ctx, slow, nil)
	fmt.Println("slow tenant, second:", res.Outcome, "retry after", res.RetryAfter.Round(time.Minute))
	// Output:
	// first delivery: ok <nil>
	// left: 19 hooks, 1048556 bytes
	// concurrent redelivery: pending retry after 30s
	// commit: <nil>
	// later redelivery: duplicate of hook-1
	// slow tenant, first: ok
	// slow tenant, second: rate_limited retry after 1h0m0s
}

// When the hook could not be stored, Release frees the event id so that
// the provider's retry is accepted.
// A dashboard, or an API that tells a tenant what it has left, reads the
// tenant's buckets without charging them: Peek answers what a Hit of one
// unit of each limit would, writing nothing.
func ExampleStore_Peek() {
	ctx := context.Background()
	store, err := fleetstore.Open("memory://")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Close()
	hooks := fleetstore.MustLimit(fleetstore.NewLimit(fleetstore.Hooks, 60, time.Minute, 20))
	for range 3 {
		_, _ = store.Hit(ctx, []fleetstore.Charge{hooks.Charge("acme", 1)}, nil)
	}

	res, err := store.Peek(ctx, "acme", hooks)
	fmt.Println(res.Outcome, err, "-", hooks.Remaining(res.Quota()[0]), "hooks left")
	res, _ = store.Peek(ctx, "acme", hooks)
	fmt.Println("again:", hooks.Remaining(res.Quota()[0]), "hooks left") // the peek took none

	// The API answer's fields, as a Hit's.
	h := http.Header{}
	headers.Write(h, &res, []fleetstore.Limit{hooks}, headers.Options{})
	fmt.Println("RateLimit:", h.Get("RateLimit"))
	// Output:
	// ok <nil> - 17 hooks left
	// again: 17 hooks left
	// RateLimit: "hooks";r=17;t=1
}

func ExampleStore_Release() {
	ctx := context.Background()
	store, err := fleetstore.Open("memory://")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Close()

	claim := fleetstore.Claim{
		Tenant: "acme", SourceID: "stripe", Key: "evt_1NG8Du2eZvKYlo2CUI79vXWy",
		HookID: "hook-1", TTL: 24 * time.Hour, PendingTTL: 30 * time.Second,
	}
	res, _ := store.Hit(ctx, nil, &claim)
	fmt.Println("hit:", res.Outcome)

	// Storing hook-1 failed: give the claim up.
	fmt.Println("release:", store.Release(ctx, claim))

	// The provider retries; the new hook gets the key.
	retry := claim
	retry.HookID = "hook-2"
	res, _ = store.Hit(ctx, nil, &retry)
	fmt.Println("retry:", res.Outcome)

	// Once committed, a claim cannot be released.
	fmt.Println("commit:", store.Commit(ctx, retry))
	err = store.Release(ctx, retry)
	fmt.Println("release after commit:", errors.Is(err, fleetstore.ErrAlreadyCommitted))
	// Output:
	// hit: ok
	// release: <nil>
	// retry: ok
	// commit: <nil>
	// release after commit: true
}

// A Limit is built once, at start-up; per request it yields a Charge, and
// turns the bucket's state after the Hit back into units (CONTRACT G10).
func ExampleLimit() {
	ctx := context.Background()
	store, err := fleetstore.Open("memory://")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Close()

	// Limit 5 = burst 4 + 1 at 1 per second (throttled's table).
	hooks := fleetstore.MustLimit(fleetstore.PerSecond(fleetstore.Hooks, 1, 5))
	for range 6 {
		res, _ := store.Hit(ctx, []fleetstore.Charge{hooks.Charge("acme", 1)}, nil)
		b := res.Quota()[0]
		fmt.Printf("%s: %d left, full again in %v, retry after %v\n", res.Outcome, hooks.Remaining(b), b.ResetAfter.Round(time.Second), res.RetryAfter.Round(time.Second))
	}
	// Output:
	// ok: 4 left, full again in 1s, retry after 0s
	// ok: 3 left, full again in 2s, retry after 0s
	// ok: 2 left, full again in 3s, retry after 0s
	// ok: 1 left, full again in 4s, retry after 0s
	// ok: 0 left, full again in 5s, retry after 0s
	// rate_limited: 0 left, full again in 5s, retry after 1s
}
