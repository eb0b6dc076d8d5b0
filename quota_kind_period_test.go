package fleetstore_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/calendar"
)

// TestQuotaKindChangesPeriod: a tenant moved on a Monday from a plan of
// 100 "quota" a day to one of 5 "quota" a week, the same kind, meets a
// day window and a week window that start at the same instant. The week
// must still admit 5 in all, through Tuesday: its count must not end with
// the day's record (Q1, Q2).
func TestQuotaKindChangesPeriod(t *testing.T) {
	var now atomic.Int64
	monday := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	now.Store(monday.UnixMicro())
	st := quotaStore(t, &now)
	ctx := context.Background()
	day := fleetstore.MustLimit(fleetstore.NewQuota("quota", 100, calendar.Day, nil))
	week := fleetstore.MustLimit(fleetstore.NewQuota("quota", 5, calendar.Week, nil))
	hit := func(l fleetstore.Limit) fleetstore.Result {
		t.Helper()
		res, err := st.Hit(ctx, []fleetstore.Charge{l.ChargeAt("acme", 1, time.UnixMicro(now.Load()))}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	hit(day) // Monday, on the daily plan
	admitted := 0
	for _, at := range []time.Time{monday, monday.Add(24 * time.Hour)} { // Monday, then Tuesday, on the weekly plan
		now.Store(at.UnixMicro())
		for range 5 {
			if hit(week).Outcome == fleetstore.OK {
				admitted++
			}
		}
	}
	if admitted != 4 {
		t.Errorf("the week admitted %d more after the day's 1, want 4 (5 a week)", admitted)
	}
}
