package fleetstore_test

import (
	"context"
	"fmt"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/calendar"
)

// A plan of "1 hook a second, 10 000 a month" charges its rate limit and
// its monthly quota in one Hit, all or nothing: a hook over the quota
// takes nothing from the per-second bucket. The quota here admits 3 a
// month, so that the example reaches it.
func ExampleNewQuota() {
	ctx := context.Background()
	store, err := fleetstore.Open("memory://")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Close()

	perSecond := fleetstore.MustLimit(fleetstore.PerSecond(fleetstore.Hooks, 1, 10))
	perMonth := fleetstore.MustLimit(fleetstore.NewQuota("hooks_month", 3, calendar.Month, time.UTC))
	plan := fleetstore.Plan{perSecond, perMonth}
	if err := plan.Check(); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(perMonth)

	var buf [fleetstore.MaxCharges]fleetstore.Charge
	var res fleetstore.Result
	for i := 1; i <= 4; i++ {
		res, err = store.Hit(ctx, plan.Charges(buf[:0], "acme", 0), nil)
		if err != nil {
			fmt.Println(err)
			return
		}
		month := res.Quota()[1]
		fmt.Printf("hook %d: %v, %d used this month, %d left\n", i, res.Outcome, month.Used,
			perMonth.Remaining(month))
	}
	// The fourth was denied by the quota alone, until the month's end.
	second, month := res.Quota()[0], res.Quota()[1]
	_, end := calendar.Window(calendar.Month, time.UTC, time.Now())
	fmt.Println("denied by the quota:", month.Denied, "by the rate limit:", second.Denied)
	fmt.Println("resets at the month's end:", perMonth.Resets(month, time.Now()).Equal(end))
	fmt.Println("hooks left this second:", perSecond.Remaining(second))
	// Output:
	// hooks_month: 3 per month (UTC)
	// hook 1: ok, 1 used this month, 2 left
	// hook 2: ok, 2 used this month, 1 left
	// hook 3: ok, 3 used this month, 0 left
	// hook 4: rate_limited, 3 used this month, 0 left
	// denied by the quota: true by the rate limit: false
	// resets at the month's end: true
	// hooks left this second: 7
}
