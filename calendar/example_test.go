package calendar_test

import (
	"fmt"
	"time"

	"github.com/fleetstore/fleetstore/calendar"
)

// The day summer time ends in Berlin lasts 25 hours; the windows a Store
// sends a store are its edges in µs, with the day before and the day
// after.
func ExampleWindow() {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		fmt.Println(err)
		return
	}
	at := time.Date(2026, 10, 25, 12, 0, 0, 0, berlin)
	start, end := calendar.Window(calendar.Day, berlin, at)
	fmt.Println(start, "to", end, "is", end.Sub(start))
	e := calendar.Edges(calendar.Day, berlin, at)
	fmt.Println(e[1] == start.UnixMicro(), e[2] == end.UnixMicro(), time.Duration(e[1]-e[0])*time.Microsecond)
	// Output:
	// 2026-10-25 00:00:00 +0200 CEST to 2026-10-26 00:00:00 +0100 CET is 25h0m0s
	// true true 24h0m0s
}
