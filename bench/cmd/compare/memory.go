package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/fleetstore/fleetstore"
)

// The shape of what the memory rows store, as an edge node would write it:
// a tenant charged on its hooks and bytes buckets; a committed claim of a
// GitHub delivery (a 36-byte UUID), held by a 26-byte hook id, on node
// "edge-01", for 72 hours.
const (
	memWorkers   = 64
	memBatch     = 100 // claims per Commit
	memIncrement = 10 * time.Minute
	memCapacity  = 20 * time.Minute
	memClaimTTL  = 72 * time.Hour
)

// memTenant is the memory rows' i-th tenant of a run.
func memTenant(run string, i int) string { return fmt.Sprintf("tenant-%s-%06d", run, i) }

// memClaim is the memory rows' i-th claim of a run, on one of 1000
// tenants, held for ttl.
func memClaim(run string, i int, ttl time.Duration) fleetstore.Claim {
	return fleetstore.Claim{
		Tenant: memTenant(run, i%1000), SourceID: "github",
		Key:    fmt.Sprintf("%08x-0f1e-11ef-8a2b-%012x", i, i*7919),
		HookID: fmt.Sprintf("01J%023d", i),
		Node:   "edge-01", TTL: ttl, PendingTTL: time.Minute,
	}
}

// openMemStore opens the redis driver on addr under a fresh key prefix,
// and returns it with the prefix.
func openMemStore(addr, run string, timeout time.Duration) (*fleetstore.Store, string, error) {
	prefix := "fsmem" + run
	st, err := fleetstore.Open(fmt.Sprintf("redis://%s/0?timeout=%s&key_prefix=%s&pool_size=%d", addr,
		timeout, prefix, memWorkers))
	return st, prefix, err
}

// measureMemory charges items tenants, then commits items claims, with
// the redis driver under a fresh key prefix, and returns the growth of
// INFO memory used_memory per item of each. It deletes what it wrote.
func measureMemory(ctx context.Context, admin *goredis.Client, addr string, items int,
	timeout time.Duration) (rows []row, warning, err error) {
	run := runID()
	st, prefix, err := openMemStore(addr, run, timeout)
	if err != nil {
		return nil, nil, err
	}
	defer st.Close()
	defer func() { _ = deleteMatching(context.WithoutCancel(ctx), admin, prefix+":*") }()

	tenant := func(i int) string { return memTenant(run, i) }
	charges := func(t string) []fleetstore.Charge {
		return []fleetstore.Charge{
			{Kind: fleetstore.Hooks, Tenant: t, Increment: memIncrement, Capacity: memCapacity},
			{Kind: fleetstore.Bytes, Tenant: t, Increment: memIncrement, Capacity: memCapacity},
		}
	}
	claim := func(i int) fleetstore.Claim { return memClaim(run, i, memClaimTTL) }
	// Load the scripts and open the pool's connections before the first
	// reading: neither is per item.
	warm := tenant(-1)
	if _, err := st.Hit(ctx, charges(warm), nil); err != nil {
		return nil, nil, fmt.Errorf("memory: warm-up hit: %w", err)
	}
	if err := st.Commit(ctx, claim(-1)); err != nil {
		return nil, nil, fmt.Errorf("memory: warm-up commit: %w", err)
	}
	ping := func(int) error { return st.Ping(ctx) }
	if err := parallel(ctx, memWorkers, memWorkers, ping); err != nil {
		return nil, nil, err
	}

	if err := settled(ctx, admin); err != nil {
		return nil, nil, err
	}
	m0, k0, err := usedMemory(ctx, admin)
	if err != nil {
		return nil, nil, err
	}
	err = parallel(ctx, items, memWorkers, func(i int) error {
		res, err := st.Hit(ctx, charges(tenant(i)), nil)
		if err == nil && res.Outcome != fleetstore.OK {
			err = fmt.Errorf("tenant %d: %v", i, res.Outcome)
		}
		return err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("memory: charge tenants: %w", err)
	}
	m1, k1, err := usedMemory(ctx, admin)
	if err != nil {
		return nil, nil, err
	}
	err = parallel(ctx, items/memBatch, memWorkers, func(b int) error {
		batch := make([]fleetstore.Claim, memBatch)
		for j := range batch {
			batch[j] = claim(b*memBatch + j)
		}
		return st.Commit(ctx, batch...)
	})
	if err != nil {
		return nil, nil, fmt.Errorf("memory: commit claims: %w", err)
	}
	m2, k2, err := usedMemory(ctx, admin)
	if err != nil {
		return nil, nil, err
	}
	n := items / memBatch * memBatch
	// One key per tenant; the claims' keys depend on the layout (at most
	// one per claim).
	if k1-k0 != int64(items) || k2-k1 > int64(n) {
		warning = fmt.Errorf("memory: want %d new keys and at most %d, got %d and %d: another client "+
			"is writing to the server or keys expired; the bytes per item are off", items, n, k1-k0, k2-k1)
	}
	return []row{
		{System: "memory_per_tenant", Bytes: round1(float64(m1-m0) / float64(items)), Items: items},
		{System: "memory_per_claim", Bytes: round1(float64(m2-m1) / float64(n)), Items: n},
	}, warning, nil
}

// steadyMemory commits claims with a short ttl at a steady rate (claims
// per second, in batches of memBatch) for three ttls, so that as many
// expire as arrive, and returns used_memory's growth per live claim at
// the end: the claims committed within the last ttl. The bytes include
// what the server has not reclaimed yet of the expired ones (Redis and
// Valkey expire lazily and by sampling), which is what a server in
// steady state holds. It deletes what it wrote.
func steadyMemory(ctx context.Context, admin *goredis.Client, addr string, ttl time.Duration,
	rate int, timeout time.Duration) (row, error) {
	run := runID()
	st, prefix, err := openMemStore(addr, run, timeout)
	if err != nil {
		return row{}, err
	}
	defer st.Close()
	defer func() { _ = deleteMatching(context.WithoutCancel(ctx), admin, prefix+":*") }()
	if err := st.Commit(ctx, memClaim(run, -1, ttl)); err != nil { // load the script
		return row{}, fmt.Errorf("memory: warm-up commit: %w", err)
	}
	ping := func(int) error { return st.Ping(ctx) }
	if err := parallel(ctx, memWorkers, memWorkers, ping); err != nil {
		return row{}, err
	}
	time.Sleep(ttl + 100*time.Millisecond) // the warm-up claim expired
	if err := settled(ctx, admin); err != nil {
		return row{}, err
	}
	m0, _, err := usedMemory(ctx, admin)
	if err != nil {
		return row{}, err
	}

	// Batch b is due at start + b×interval; workers take batches in turn,
	// each at its time, and record when its Commit returned.
	interval := time.Duration(float64(time.Second) * memBatch / float64(rate))
	batches := int(3 * ttl / interval)
	done := make([]time.Time, batches)
	start := time.Now()
	err = parallel(ctx, batches, memWorkers, func(b int) error {
		time.Sleep(time.Until(start.Add(time.Duration(b) * interval)))
		batch := make([]fleetstore.Claim, memBatch)
		for j := range batch {
			batch[j] = memClaim(run, b*memBatch+j, ttl)
		}
		if err := st.Commit(ctx, batch...); err != nil {
			return err
		}
		done[b] = time.Now()
		return nil
	})
	if err != nil {
		return row{}, fmt.Errorf("memory: steady commits: %w", err)
	}
	m1, _, err := usedMemory(ctx, admin)
	end := time.Now()
	if err != nil {
		return row{}, err
	}
	live := 0
	for _, t := range done {
		if end.Sub(t) < ttl {
			live += memBatch
		}
	}
	if live == 0 {
		return row{}, fmt.Errorf("memory: steady state: no claim committed within the last %v", ttl)
	}
	bytes := round1(float64(m1-m0) / float64(live))
	return row{System: "memory_per_live_claim", Bytes: bytes, Items: live,
		Seconds: round1(end.Sub(start).Seconds())}, nil
}

// settled waits (at most 10s) until the server has no object left to
// free in the background (INFO memory lazyfree_pending_objects: what an
// UNLINK of earlier rows left), so that used_memory does not fall during
// a measurement.
func settled(ctx context.Context, admin *goredis.Client) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := admin.Info(ctx, "memory").Result()
		if err != nil {
			return err
		}
		n, err := infoField(info, "lazyfree_pending_objects")
		if err != nil || n == 0 || time.Now().After(deadline) {
			return nil // a server without the field frees at once
		}
		sleep(ctx, 50*time.Millisecond)
	}
}

// usedMemory returns INFO memory used_memory and the number of keys.
//
// The clients' buffers (mem_clients_normal, where the server has it) are
// left out: they grow and shrink with the traffic of the moment, not with
// what is stored.
func usedMemory(ctx context.Context, admin *goredis.Client) (bytes, keys int64, err error) {
	info, err := admin.Info(ctx, "memory").Result()
	if err != nil {
		return 0, 0, err
	}
	v, err := infoField(info, "used_memory")
	if err != nil {
		return 0, 0, err
	}
	if clients, err := infoField(info, "mem_clients_normal"); err == nil {
		v -= clients
	}
	keys, err = admin.DBSize(ctx).Result()
	return int64(v), keys, err
}

// parallel calls f(0) … f(n-1) from workers goroutines and returns the
// first error.
func parallel(ctx context.Context, n, workers int, f func(i int) error) error {
	var next atomic.Int64
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := f(i); err != nil {
					once.Do(func() { first = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return first
}

// deleteMatching unlinks every key matching pattern (SCAN, then UNLINK in
// batches).
func deleteMatching(ctx context.Context, admin *goredis.Client, pattern string) error {
	var cursor uint64
	for {
		keys, next, err := admin.Scan(ctx, cursor, pattern, 1000).Result()
		if err != nil {
			return err
		}
		if len(keys) > 0 {
			if err := admin.Unlink(ctx, keys...).Err(); err != nil {
				return err
			}
		}
		if next == 0 {
			return nil
		}
		cursor = next
	}
}

// runID is a short random id that makes a run's keys and tenants fresh
// (and findable: every key of a run holds it).
func runID() string {
	return strconv.FormatUint(rand.Uint64()>>12, 36)
}
