package fleetstore_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/calendar"
	"github.com/fleetstore/fleetstore/headers"
	"github.com/fleetstore/fleetstore/observe"
)

// eventsOf records the Events of a Store.
type eventsOf struct{ events []observe.Event }

func (o *eventsOf) Observe(_ context.Context, e observe.Event) { o.events = append(o.events, e) }

// TestShadow: a shadow limit is charged with the Hit's other charges and
// reported, would-deny and all, but never denies, never sets the
// retry-after and is left out of the headers (CONTRACT §1.2). The Store
// does it for every driver; webhook's TestEndToEndRedis runs a shadow
// limit on a real server.
func TestShadow(t *testing.T) {
	for name, url := range map[string]string{"memory": "memory://"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			obs := &eventsOf{}
			st, err := fleetstore.Open(url, fleetstore.WithObserver(obs))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			// An hour per unit: nothing refills during the test.
			real := fleetstore.MustLimit(fleetstore.NewLimit(fleetstore.Hooks, 1, time.Hour, 4))
			next := fleetstore.MustLimit(fleetstore.NewLimit("hooks_next", 1, time.Hour, 2)).Shadow()
			if !next.IsShadow() || real.IsShadow() {
				t.Fatal("IsShadow")
			}
			plan := fleetstore.Plan{real, next}
			tenant := "shadow-" + name + time.Now().Format("150405.000000")
			ctx := context.Background()
			for i := range 6 {
				res, err := st.Hit(ctx, plan.Charges(nil, tenant, 0), nil)
				if err != nil {
					t.Fatal(err)
				}
				q := res.Quota()
				wantOutcome, wantWould := fleetstore.OK, i >= 2
				if i >= 4 {
					wantOutcome = fleetstore.RateLimited
				}
				if res.Outcome != wantOutcome || q[1].Denied != wantWould || !q[1].Shadow || q[0].Shadow {
					t.Fatalf("hit %d: %v, shadow bucket %+v; want %v, would-deny %v",
						i+1, res.Outcome, q[1], wantOutcome, wantWould)
				}
				// Taken with the others: 1h per hit until the 4th; not
				// on a denial (all or nothing).
				if want := time.Duration(min(i+1, 4)) * time.Hour; q[1].ResetAfter < want-time.Second ||
					q[1].ResetAfter > want {
					t.Errorf("hit %d: shadow reset-after %v, want ~%v", i+1, q[1].ResetAfter, want)
				}
				if wantOutcome == fleetstore.RateLimited && (!q[0].Denied ||
					res.RetryAfter > time.Hour+time.Second) {
					t.Errorf("hit %d: real %+v, retry-after %v: want the real limit's wait, ~1h",
						i+1, q[0], res.RetryAfter)
				}
				h := http.Header{}
				headers.Write(h, &res, plan, headers.Options{})
				if got := h.Get("RateLimit-Policy"); got != `"hooks";q=4;w=14400` {
					t.Errorf("hit %d: RateLimit-Policy %q, want the real limit's only", i+1, got)
				}
				e := obs.events[len(obs.events)-1]
				if k := e.ShadowDeniedKinds(); wantWould != (len(k) == 1 && k[0] == "hooks_next") {
					t.Errorf("hit %d: Event.ShadowDenied %v", i+1, k)
				}
				if k := e.DeniedKinds(); (wantOutcome == fleetstore.RateLimited) != (len(k) == 1 &&
					k[0] == fleetstore.Hooks) {
					t.Errorf("hit %d: Event.Denied %v", i+1, k)
				}
			}
			// A shadow charge over its capacity is no ErrOverCapacity.
			big := fleetstore.MustLimit(fleetstore.NewByteLimit("bytes_next", 10, 100)).Shadow()
			res, err := st.Hit(ctx, fleetstore.Plan{big}.Charges(nil, tenant+"b", 1000), nil)
			if err != nil || res.Outcome != fleetstore.OK || !res.Quota()[0].Denied {
				t.Errorf("a shadow body over its burst: %v %+v, want OK, would-deny", err, res.Quota())
			}
		})
	}
}

// TestHitAllocs: a Hit of charges on memory:// allocates nothing, a
// quota's included; a shadow charge costs the copy the driver gets.
func TestHitAllocs(t *testing.T) {
	st, err := fleetstore.Open("memory://")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	hooks := fleetstore.MustLimit(fleetstore.PerSecond(fleetstore.Hooks, 1e6, 1e6))
	body := fleetstore.MustLimit(fleetstore.NewByteLimit(fleetstore.Bytes, 1e9, 1e9))
	month := fleetstore.MustLimit(fleetstore.NewQuota("hooks_month", 1e9, calendar.Month, nil))
	ctx := context.Background()
	for _, c := range []struct {
		plan fleetstore.Plan
		want float64
	}{{fleetstore.Plan{hooks, body}, 0}, {fleetstore.Plan{hooks, body.Shadow()}, 1},
		{fleetstore.Plan{hooks, body, month}, 0}} {
		var buf [fleetstore.MaxCharges]fleetstore.Charge
		charges := c.plan.Charges(buf[:0], "allocs", 100)
		st.Hit(ctx, charges, nil) // the bucket exists
		if n := testing.AllocsPerRun(100, func() { st.Hit(ctx, charges, nil) }); n != c.want {
			t.Errorf("a Hit of %v: %v allocations, want %v", c.plan, n, c.want)
		}
	}
}

// TestShadowDebt: a shadow bucket charged with every allowed Hit runs past
// 366 days ahead, the largest capacity a driver takes; its Hits are still
// decided by the other charges alone, and it reports would-deny.
func TestShadowDebt(t *testing.T) {
	st, err := fleetstore.Open("memory://")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	real := fleetstore.MustLimit(fleetstore.PerSecond(fleetstore.Hooks, 1e6, 1e6))
	next := fleetstore.MustLimit(fleetstore.NewLimit("hooks_next", 1, 100*24*time.Hour, 1)).Shadow()
	ctx := context.Background()
	for i := range 8 {
		claim := fleetstore.Claim{Tenant: "debt", SourceID: "s", Key: fmt.Sprint("k", i), HookID: "h",
			TTL: time.Hour, PendingTTL: time.Minute}
		res, err := st.Hit(ctx, fleetstore.Plan{next, real}.Charges(nil, "debt", 0), &claim)
		if err != nil || res.Outcome != fleetstore.OK {
			t.Fatalf("hit %d, the shadow bucket %d days ahead: %v, %v; want OK", i+1, i*100, res.Outcome, err)
		}
		q := res.Quota()
		if q[1].Shadow || !q[0].Shadow || q[0].Denied != (i > 0) || q[1].Denied {
			t.Errorf("hit %d: %+v", i+1, q)
		}
		// Three charges take it 300 days ahead; a fourth would pass 366
		// days, so from then on it stands there.
		if want := time.Duration(min(i+1, 3)) * 100 * 24 * time.Hour; q[0].ResetAfter > want ||
			q[0].ResetAfter < want-time.Minute {
			t.Errorf("hit %d: shadow reset-after %v, want ~%v", i+1, q[0].ResetAfter, want)
		}
	}
}
