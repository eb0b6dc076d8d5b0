package memcached

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/bradfitz/gomemcache/memcache"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/claim"
)

func TestItemsRoundTrip(t *testing.T) {
	t.Parallel()
	b := bucketState{
		tats: []kindTAT{{"hooks", 1790000000123456}, {"bytes", 1790000000000001}, {"old", 5}},
		wins: []kindWindow{{"hooks", 1788220800000000, 1790812800000000, 42}, {"hooks", 50, 100, 7},
			{"month", 1790812800000000, 1793491200000000, 1 << 50}},
	}
	got, err := parseBucket(encodeBucket(b, 100))
	if err != nil || len(got.tats) != 2 || got.tats[0] != b.tats[0] || got.tats[1] != b.tats[1] ||
		len(got.wins) != 2 || got.wins[0] != b.wins[0] || got.wins[1] != b.wins[2] {
		t.Fatalf("bucket round trip: %+v, %v (the passed TAT and window dropped)", got, err)
	}
	if u := got.until(); u != 1793491200000000 {
		t.Fatalf("until %d, want the last window's end", u)
	}
	for _, rec := range []claim.State{
		{Phase: claim.Pending, Expires: 1790000000123456, HookID: "hook\n 1", Node: "node:\x00"},
		{Phase: claim.Committed, Expires: 7, HookID: strings.Repeat("\xff", 256), Node: ""},
	} {
		got, err := parseClaim(encodeClaim(rec))
		if err != nil || got != rec {
			t.Fatalf("claim round trip: %+v, %v, want %+v", got, err, rec)
		}
	}
	if got, err := parseClaim(nil); got != (claim.State{}) || err != nil {
		t.Fatalf("tombstone: %+v, %v, want absent", got, err)
	}
}

// malformedBuckets and malformedClaims are item values this driver never
// writes.
var (
	malformedBuckets = []string{
		" ", "2", "1 hooks", "1 hooks:", "1 hooks:x", "1 :5", "1 Hooks:5", "1 hooks:-1", "1 hooks:5 hooks:6",
		"1 hooks:99999999999999999999", "\x00\xff",
		"1 hooks@", "1 hooks@1-2", "1 hooks@1=2", "1 hooks@2-1=0", "1 hooks@1-1=0", "1 hooks@-1-2=0",
		"1 hooks@1-2=-1", "1 hooks@1-2=1125899906842625", "1 Hooks@1-2=0", "1 @1-2=0", "1 hooks@1-2=x",
		"1 hooks@1-2=0 hooks@1-3=0",
	}
	malformedClaims = []string{
		"p", "\x00\xff", "p\x00\x00\x00\x00\x00\x00\x00\x05", // too short
		"x\x00\x00\x00\x00\x00\x00\x00\x05\x01h",                                         // unknown state
		"1 p 1790000000123456 1\nh",                                                      // the text format
		"p\x80\x00\x00\x00\x00\x00\x00\x05\x01h",                                         // negative expiry
		"c\x00\x00\x00\x00\x00\x00\x00\x05\x00h",                                         // empty hook_id
		"c\x00\x00\x00\x00\x00\x00\x00\x05\x02h",                                         // hook_id past the end
		"c\x00\x00\x00\x00\x00\x00\x00\x05\x80",                                          // truncated length
		"c\x00\x00\x00\x00\x00\x00\x00\x05\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01h", // length overflows
	}
)

func FuzzParse(f *testing.F) {
	for _, v := range append(malformedBuckets, malformedClaims...) {
		f.Add([]byte(v))
	}
	f.Add(encodeBucket(bucketState{tats: []kindTAT{{"hooks", 10}}, wins: []kindWindow{{"hooks", 1, 20, 3}}}, 0))
	f.Add(encodeClaim(claim.State{Phase: claim.Pending, Expires: 10, HookID: "h", Node: "n"}))
	f.Fuzz(func(t *testing.T, v []byte) {
		parseBucket(v) // must not panic
		if r, err := parseClaim(v); err == nil && r.Phase != claim.Absent && r.HookID == "" {
			t.Fatalf("claim with an empty hook_id parsed from %q", v)
		}
	})
}

// TestMalformedItems writes values the driver never writes into a
// tenant's bucket and claim items: every call returns an error matching
// ErrUnavailable, never a panic or a decision (V4).
func TestMalformedItems(t *testing.T) {
	t.Parallel()
	srv := startServers(t, 1)
	st := openStore(t, srv, 5*time.Second)
	mc := memcache.New(srv...)
	defer mc.Close()
	k := keys{prefix: testPrefix(t)}
	ctx := context.Background()
	fresh := func() (fleetstore.Charge, fleetstore.Claim) {
		tenant := "tenant-" + randName()
		return fleetstore.Charge{Kind: fleetstore.Hooks, Tenant: tenant, Increment: time.Second, Capacity: time.Second},
			fleetstore.Claim{Tenant: tenant, SourceID: "s", Key: "k", HookID: "h", TTL: time.Hour, PendingTTL: time.Hour}
	}
	for i, v := range malformedBuckets {
		c, _ := fresh()
		if err := mc.Set(&memcache.Item{Key: k.bucket(c.Tenant), Value: []byte(v), Expiration: 60}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Hit(ctx, []fleetstore.Charge{c}, nil); !errors.Is(err, fleetstore.ErrUnavailable) {
			t.Errorf("value %d %q in the bucket item: hit error %v, want ErrUnavailable", i, v, err)
		}
	}
	for i, v := range malformedClaims {
		_, cl := fresh()
		if err := mc.Set(&memcache.Item{Key: k.claim(cl.Tenant, cl.SourceID, cl.Key), Value: []byte(v), Expiration: 60}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Hit(ctx, nil, &cl); !errors.Is(err, fleetstore.ErrUnavailable) {
			t.Errorf("value %d %q in the claim item: hit error %v, want ErrUnavailable", i, v, err)
		}
		for name, settle := range map[string]func(context.Context, ...fleetstore.Claim) error{"commit": st.Commit, "release": st.Release} {
			if err := settle(ctx, cl); !errors.Is(err, fleetstore.ErrUnavailable) {
				t.Errorf("value %d %q in the claim item: %s error %v, want ErrUnavailable", i, v, name, err)
			}
		}
	}
}
