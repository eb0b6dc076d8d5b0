package fleetstore_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/gcra"
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
	// fleetstore: open: invalid url: foo: unknown parameter (accepted: timeout, key_prefix, fallback_nodes, fallback_share, fallback_outbox, fallback_claims)
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
	// burst of 1 MiB.
	hookInc, hookCap, _ := gcra.Rate(10, time.Second, 20)
	body := []byte(`{"action":"opened"}`)
	byteInc, byteCap, _ := gcra.ByteRate(1<<20, 1<<20, int64(len(body)))
	charges := []fleetstore.Charge{
		{Kind: fleetstore.Hooks, Tenant: "acme", Increment: hookInc, Capacity: hookCap},
		{Kind: fleetstore.Bytes, Tenant: "acme", Increment: byteInc, Capacity: byteCap},
	}
	claim := fleetstore.Claim{
		Tenant: "acme", SourceID: "github", Key: "72d3162e-cc78-11e3-81ab-4c9367dc0958",
		HookID: "hook-1", Node: "edge-1",
		TTL: 24 * time.Hour, PendingTTL: 30 * time.Second,
	}

	res, err := store.Hit(ctx, charges, &claim)
	fmt.Println("first delivery:", res.Outcome, err)

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
	// concurrent redelivery: pending retry after 30s
	// commit: <nil>
	// later redelivery: duplicate of hook-1
	// slow tenant, first: ok
	// slow tenant, second: rate_limited retry after 1h0m0s
}

// When the hook could not be stored, Release frees the event id so that
// the provider's retry is accepted.
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
