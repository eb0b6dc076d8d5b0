package fleetstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/calendar"
)

// TestFallbackQuotaOutside: a quota charge built at a time more than a
// window away from the clocks (a caller's stale ChargeAt) is refused by a
// healthy store, and could not be decided locally either. That is no
// outage: the Store does not go degraded for it, and another tenant's
// next Hit is decided by the shared store.
func TestFallbackQuotaOutside(t *testing.T) {
	d := newFlaky()
	st := openOnFlaky(t, d, "quota-outside", fleetstore.Fallback{Nodes: 4})
	q := fleetstore.MustLimit(fleetstore.NewQuota("hooks_month", 100, calendar.Month, nil))
	ctx := context.Background()
	if _, err := st.Hit(ctx, []fleetstore.Charge{q.ChargeAt("acme", 1, time.Now().Add(-70*24*time.Hour))}, nil); err == nil {
		t.Fatal("a charge 70 days old: no error")
	}
	if s := st.FallbackStats(); s.Degraded || s.Outages != 0 {
		t.Errorf("after one refused charge: %+v, want no outage", s)
	}
	res, err := st.Hit(ctx, []fleetstore.Charge{q.Charge("initech", 1)}, nil)
	if err != nil || res.Local {
		t.Errorf("the next tenant's Hit: %+v %v, want a shared decision", res, err)
	}
}
