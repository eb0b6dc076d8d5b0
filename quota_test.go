package fleetstore_test

import (
	"time"

	"github.com/fleetstore/fleetstore/driver"
)

// okResult is what an honest driver answers to a Hit of charges on fresh
// buckets: OK, each bucket one increment from full (G10).
func okResult(charges []driver.Charge) driver.Result {
	r := driver.Result{Outcome: driver.OK, NBuckets: len(charges)}
	for i, c := range charges {
		r.Buckets[i].ResetAfter = c.Increment
	}
	return r
}

// reports returns a func that gives a Result one bucket state per
// reset-after in resets (G10), as a driver reports them.
func reports(resets ...time.Duration) func(driver.Result) driver.Result {
	return func(r driver.Result) driver.Result {
		r.NBuckets = len(resets)
		for i, d := range resets {
			r.Buckets[i].ResetAfter = d
		}
		return r
	}
}
