package redis

import (
	"strconv"
	"strings"
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

// TestClaimRecordLayout: a claim is one key of the tenant's tag and a
// 16-byte digest, whatever the length of its source and key, holding
// the state and the hook_id alone (CONTRACT §7): "q", the pending expiry
// (16 digits, µs) and the hook_id, then "c" and the hook_id once
// committed. Its bytes do not grow with the event key or the node.
func TestClaimRecordLayout(t *testing.T) {
	t.Parallel()
	srv := testserver.StartRedis(t)
	st, prefix := openStore(t, srv.URL())
	tenant := "t-" + randHex(4)
	for _, key := range []string{"k", strings.Repeat("e", 1024)} {
		cl := claim(tenant, "github", key, "hook-"+randHex(4))
		cl.Node = strings.Repeat("n", 256)
		k := scripts.ClaimKey(prefix, tenant, cl.SourceID, cl.Key)
		if want := len(scripts.TenantTag(prefix, tenant)) + scripts.DigestSize; len(k) != want {
			t.Fatalf("claim key of %d bytes, want %d", len(k), want)
		}
		mustHit(t, st, nil, cl, fleetstore.OK)
		v, err := srv.Do("GET", k)
		if err != nil {
			t.Fatal(err)
		}
		s, _ := v.(string)
		if len(s) != 1+16+len(cl.HookID) || s[0] != 'q' || s[17:] != cl.HookID {
			t.Errorf("pending record %q, want q, 16 digits, the hook_id", s)
		} else if us, err := strconv.ParseInt(s[1:17], 10, 64); err != nil || time.Until(time.UnixMicro(us)) > cl.PendingTTL || time.Until(time.UnixMicro(us)) < cl.PendingTTL-time.Minute {
			t.Errorf("pending record's expiry %q: want %v from the hit", s[1:17], cl.PendingTTL)
		}
		if err := st.Commit(ctx(t), *cl); err != nil {
			t.Fatal(err)
		}
		if v, err = srv.Do("GET", k); err != nil {
			t.Fatal(err)
		}
		if s, _ := v.(string); s != "c"+cl.HookID {
			t.Errorf("committed record %q, want %q", s, "c"+cl.HookID)
		}
	}
}
