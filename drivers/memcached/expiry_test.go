package memcached

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore"
)

func TestExpiration(t *testing.T) {
	const now = int64(1_790_000_000_123_456) // µs, mid-second
	const s = int64(time.Second / time.Microsecond)
	nowCeil := (now + s - 1) / s
	tests := []struct {
		name string
		give int64 // µs to live
		want int32
	}{
		{"1µs is 1s, plus the tick", 1, 2},
		{"expired already is still never 0", -5 * s, 1},
		{"1s exactly", s, 2},
		{"1.9s rounds up", 19 * s / 10, 3},
		{"2 591 998 s + 1µs: relative 2 592 000", 2_591_998*s + 1, 2_592_000},
		{"2 591 999 s: relative 2 592 000", 2_591_999 * s, 2_592_000},
		{"2 592 000 s: absolute", 2_592_000 * s, int32(nowCeil + 2_592_000 + 1)},
		{"2 592 001 s: absolute", 2_592_001 * s, int32(nowCeil + 2_592_001 + 1)},
		{"366 days: absolute", 366 * 24 * 3600 * s, int32(nowCeil + 366*24*3600 + 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := expiration(now, now+tt.give); got != tt.want {
				t.Errorf("expiration(now, now+%dµs) = %d, want %d", tt.give, got, tt.want)
			}
		})
	}
	if got := expiration(now, 1<<62); got != 1<<31-1 {
		t.Errorf("expiration past 2038 = %d, want MaxInt32", got)
	}
}

// TestThirtyDays writes claims and a bucket whose expiry is on either side
// of memcached's 30-day line (where an exptime turns into a Unix time) and
// checks, in memcached itself, that they live as long as asked.
func TestThirtyDays(t *testing.T) {
	t.Parallel()
	srv := startServers(t, 1)
	st := openStore(t, srv, time.Second)
	ctx := context.Background()
	tenant := "tenant-30d-" + randName()
	for _, secs := range []int64{2_591_999, 2_592_000, 2_592_001, 31 * 24 * 3600} {
		ttl := time.Duration(secs) * time.Second
		cl := fleetstore.Claim{Tenant: tenant, SourceID: "src", Key: "evt-" + strconv.FormatInt(secs, 10), HookID: "hook-a", TTL: ttl, PendingTTL: ttl}
		if res, err := st.Hit(ctx, nil, &cl); err != nil || res.Outcome != fleetstore.OK {
			t.Fatalf("PendingTTL %ds: hit = %v, %v", secs, res, err)
		}
		other := cl
		other.HookID = "hook-b"
		res, err := st.Hit(ctx, nil, &other)
		if err != nil || res.Outcome != fleetstore.Pending {
			t.Fatalf("PendingTTL %ds: another hook's hit = %v, %v, want pending", secs, res, err)
		}
		if min := ttl - 5*time.Second; res.RetryAfter < min || res.RetryAfter > ttl {
			t.Errorf("PendingTTL %ds: retry-after %v", secs, res.RetryAfter)
		}
		wantTTL(t, srv, tenant, keys{prefix: testPrefix(t)}.claim(tenant, cl.SourceID, cl.Key), ttl)
		if err := st.Commit(ctx, cl); err != nil {
			t.Fatalf("TTL %ds: commit: %v", secs, err)
		}
		if res, err := st.Hit(ctx, nil, &other); err != nil || res.Outcome != fleetstore.Duplicate {
			t.Fatalf("TTL %ds: hit after commit = %v, %v, want duplicate", secs, res, err)
		}
		wantTTL(t, srv, tenant, keys{prefix: testPrefix(t)}.claim(tenant, cl.SourceID, cl.Key), ttl)
	}

	// A bucket whose TAT is 31 days ahead.
	inc := 31 * 24 * time.Hour
	c := fleetstore.Charge{Kind: fleetstore.Hooks, Tenant: tenant, Increment: inc, Capacity: 2 * inc}
	for i, want := range []fleetstore.Outcome{fleetstore.OK, fleetstore.OK, fleetstore.RateLimited} {
		if res, err := st.Hit(ctx, []fleetstore.Charge{c}, nil); err != nil || res.Outcome != want {
			t.Fatalf("31-day bucket, charge %d: %v, %v, want %v", i, res, err, want)
		}
	}
	wantTTL(t, srv, tenant, ":b:", 2*inc)
}

// wantTTL checks that the one record of tenant whose key contains part
// lives ttl, within a few seconds, as memcached sees it.
func wantTTL(t *testing.T, srv []string, tenant, part string, ttl time.Duration) {
	t.Helper()
	recs, err := mcRecords(context.Background(), srv, testPrefix(t), tenant)
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, r := range recs {
		if !strings.Contains(r.Key, part) {
			continue
		}
		found++
		if r.TTL < ttl-3*time.Second || r.TTL > ttl+3*time.Second {
			t.Errorf("record %s lives %v in memcached, want %v", r.Key, r.TTL, ttl)
		}
	}
	if found != 1 {
		t.Errorf("%d records with %q in their key, want 1 (records: %v)", found, part, recs)
	}
}
