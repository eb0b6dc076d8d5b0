package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/calendar"
	"github.com/fleetstore/fleetstore/internal/testing/testserver"
)

// TestPlanWithQuota: through the Store, a plan of a rate limit and a
// monthly quota charges both in one Hit; every answer reports the quota's
// remaining units and its reset at the month's end, Peek the same without
// charging, and the Hit past the quota is denied until then.
func TestPlanWithQuota(t *testing.T) {
	st := openStore(t, testserver.StartPostgres(t).URL()+"&timeout=5s")
	ctx := context.Background()
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Skip(err)
	}
	rate := fleetstore.MustLimit(fleetstore.NewLimit(fleetstore.Hooks, 1000, time.Second, 1000))
	month := fleetstore.MustLimit(fleetstore.NewQuota("hooks_month", 3, calendar.Month, berlin))
	plan := fleetstore.Plan{rate, month}
	tenant := "acme"
	for i := int64(1); i <= 4; i++ {
		now := time.Now()
		res, err := st.Hit(ctx, plan.Charges(nil, tenant, 100), nil)
		if err != nil {
			t.Fatal(err)
		}
		b := res.Quota()[1]
		_, end := calendar.Window(calendar.Month, berlin, now)
		if got := month.Resets(b, now); !got.Equal(end) {
			t.Fatalf("hit %d: resets at %v, want the month's end %v", i, got, end)
		}
		if i <= 3 && (res.Outcome != fleetstore.OK || month.Remaining(b) != 3-i) {
			t.Fatalf("hit %d: %v with %d left, want OK with %d", i, res.Outcome, month.Remaining(b), 3-i)
		}
		if i == 4 && (res.Outcome != fleetstore.RateLimited || !b.Denied || res.Quota()[0].Denied ||
			res.RetryAfter < time.Until(end)-time.Minute) {
			t.Fatalf("hit 4: %v %+v retry after %v, want denied by the quota until %v", res.Outcome,
				res.Quota(), res.RetryAfter, end)
		}
	}
	p, err := st.Peek(ctx, tenant, month)
	if err != nil || p.Outcome != fleetstore.RateLimited || month.Remaining(p.Quota()[0]) != 0 {
		t.Fatalf("peek: %+v %v, want the quota spent", p, err)
	}
	// Nodes whose clocks are a minute either side of the store's send
	// different windows around a boundary; the store counts them in the
	// one holding its own clock, the same for both.
	day := fleetstore.MustLimit(fleetstore.NewQuota("hooks_day", 10, calendar.Day, nil))
	for i, skew := range []time.Duration{time.Minute, -time.Minute, time.Minute, -time.Minute} {
		res, err := st.Hit(ctx, []fleetstore.Charge{day.ChargeAt(tenant, 1, time.Now().Add(skew))}, nil)
		if err != nil || res.Outcome != fleetstore.OK || res.Quota()[0].Used != int64(i+1) {
			t.Fatalf("hit %d from a node %v off: %+v %v, want OK with %d used", i+1, skew, res, err, i+1)
		}
	}
}
