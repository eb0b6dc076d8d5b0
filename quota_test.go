package fleetstore_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/driver"
)

// okResult is what an honest driver answers to a Hit of charges on fresh
// buckets: OK, each bucket one increment from full (G10).
func okResult(charges []driver.Charge) driver.Result {
	r := driver.Result{Outcome: driver.OK, NBuckets: len(charges)}
	for i, c := range charges {
		r.Buckets[i].ResetAfter = c.Increment
	}
	return r
}

// reports returns a func that gives a Result one bucket state per
// reset-after in resets (G10), as a driver reports them.
func reports(resets ...time.Duration) func(driver.Result) driver.Result {
	return func(r driver.Result) driver.Result {
		r.NBuckets = len(resets)
		for i, d := range resets {
			r.Buckets[i].ResetAfter = d
		}
		return r
	}
}

// TestLocalQuota: a Hit the fallback decides locally (CONTRACT §8)
// reports the local bucket at this node's share (G10): its reset-after as
// it is, its headroom in the fleet's charge, rounded down, so that
// remaining counts by the fleet's limit are what this node has left.
func TestLocalQuota(t *testing.T) {
	t.Parallel()
	var now atomic.Int64
	now.Store(1_800_000_000_000_000)
	d := newFlaky()
	d.set(refused)
	st := openOnFlaky(t, d, "local-quota", fleetstore.Fallback{Nodes: 4}, fleetstore.WithLocalClock(now.Load))
	// 1/s, burst 8 fleet-wide: 1/4s, burst 2 on each of 4 nodes (I' = 4s,
	// C' = 8s). 3 bytes of 10 B/s, burst 100 B: I = 300ms, C = 10s; I' = 1.2s.
	hooks := fleetstore.Charge{Kind: fleetstore.Hooks, Tenant: "acme", Increment: time.Second, Capacity: 8 * time.Second}
	bytes := fleetstore.Charge{Kind: fleetstore.Bytes, Tenant: "acme", Increment: 300 * time.Millisecond, Capacity: 10 * time.Second}
	for i, want := range []struct {
		outcome       fleetstore.Outcome
		hooksReset    time.Duration
		hooksHeadroom time.Duration // in the fleet's 1s charges
		hooksDenied   bool
		bytesReset    time.Duration // bytes never denies here
		bytesHeadroom time.Duration
	}{
		{fleetstore.OK, 4 * time.Second, time.Second, false, 1200 * time.Millisecond, 2200 * time.Millisecond},
		{fleetstore.OK, 8 * time.Second, 0, false, 2400 * time.Millisecond, 1900 * time.Millisecond},
		{fleetstore.RateLimited, 8 * time.Second, 0, true, 2400 * time.Millisecond, 1900 * time.Millisecond},
	} {
		res, err := st.Hit(context.Background(), []fleetstore.Charge{hooks, bytes}, nil)
		if err != nil || !res.Local || res.Outcome != want.outcome {
			t.Fatalf("hit %d: %+v, %v; want a local %v", i+1, res, err, want.outcome)
		}
		q := res.Quota()
		if len(q) != 2 {
			t.Fatalf("hit %d: %d bucket states, want 2", i+1, len(q))
		}
		if q[0] != (fleetstore.Bucket{Kind: fleetstore.Hooks, ResetAfter: want.hooksReset, Headroom: want.hooksHeadroom, Denied: want.hooksDenied}) {
			t.Errorf("hit %d: hooks %+v, want reset %v headroom %v denied %v", i+1, q[0], want.hooksReset, want.hooksHeadroom, want.hooksDenied)
		}
		if q[1] != (fleetstore.Bucket{Kind: fleetstore.Bytes, ResetAfter: want.bytesReset, Headroom: want.bytesHeadroom}) {
			t.Errorf("hit %d: bytes %+v, want reset %v headroom %v", i+1, q[1], want.bytesReset, want.bytesHeadroom)
		}
		if res.Outcome == fleetstore.RateLimited && res.RetryAfter != 4*time.Second {
			t.Errorf("hit %d: retry-after %v, want the local bucket's 4s", i+1, res.RetryAfter)
		}
	}
}
