package redis

import (
	"testing"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/internal/scripts"
	"github.com/fleetstore/fleetstore/internal/testserver"
)

// TestBucketExpiryFollowsLatestTAT: the tenant's hash expires at its
// latest TAT of every kind, charged or not (G7): a charge of a kind with
// an earlier TAT never shortens it, a later TAT lengthens it. The script
// knows the hash's expiry from the TATs it reads (no PTTL), so a broken
// reckoning shows here.
func TestBucketExpiryFollowsLatestTAT(t *testing.T) {
	t.Parallel()
	srv := testserver.StartRedis(t)
	st, prefix := openStore(t, srv.URL())
	tenant := "t-" + randHex(4)
	long := fleetstore.Charge{Kind: "long", Tenant: tenant, Increment: 10 * time.Minute, Capacity: time.Hour}
	short := fleetstore.Charge{Kind: "short", Tenant: tenant, Increment: time.Second, Capacity: time.Minute}
	pttl := func(what string, lo, hi time.Duration) {
		t.Helper()
		v, err := srv.Do("PTTL", scripts.BucketKey(prefix, tenant))
		if err != nil {
			t.Fatal(err)
		}
		ms, _ := v.(int64)
		if got := time.Duration(ms) * time.Millisecond; got < lo || got > hi {
			t.Errorf("%s: the hash expires in %v, want %v to %v", what, got, lo, hi)
		}
	}
	mustHit(t, st, []fleetstore.Charge{short}, nil, fleetstore.OK)
	pttl("a new hash", 900*time.Millisecond, time.Second+2*time.Millisecond)
	mustHit(t, st, []fleetstore.Charge{long}, nil, fleetstore.OK)
	pttl("a later TAT of another kind", 10*time.Minute-time.Minute, 10*time.Minute+2*time.Millisecond)
	mustHit(t, st, []fleetstore.Charge{short}, nil, fleetstore.OK)
	pttl("an earlier TAT charged after it", 10*time.Minute-time.Minute, 10*time.Minute+2*time.Millisecond)
	mustHit(t, st, []fleetstore.Charge{short, long}, nil, fleetstore.OK)
	pttl("both, the later one lengthened", 20*time.Minute-time.Minute, 20*time.Minute+2*time.Millisecond)
	// Reset drops the hash: the next charge starts a new one with its own
	// expiry.
	if err := st.Reset(ctx(t), tenant); err != nil {
		t.Fatal(err)
	}
	mustHit(t, st, []fleetstore.Charge{short}, nil, fleetstore.OK)
	pttl("after Reset", 900*time.Millisecond, time.Second+2*time.Millisecond)
}
