package gcra_test

import (
	"testing"

	"github.com/fleetstore/fleetstore/gcra"
)

// TestQuotaThrottledTable follows the golden table of throttled's GCRA
// (github.com/throttled/throttled/v2, rate_test.go, TestRateLimit): a
// limit of 5 = burst 4 + 1 at 1 per second, i.e. increment 1s and
// capacity 5s here. Remaining is Headroom in whole increments, rounded
// down; reset is ResetAfter; retry is the denial's Wait. Rows 0 (a
// request over the burst: ErrOverCapacity at the Store, G6) and 12 (a
// zero-cost peek: increments are ≥ 1µs) have no counterpart here; every
// other row is kept, with its number.
func TestQuotaThrottledTable(t *testing.T) {
	const capacity = 5 * sec
	rows := []struct {
		row       int
		at        int64 // µs after the start
		cost      int64 // increments charged
		remaining int64
		reset     int64 // µs
		retry     int64 // µs; 0: conforms
	}{
		{1, 0, 1, 4, 1 * sec, 0},
		{2, 0, 1, 3, 2 * sec, 0},
		{3, 0, 1, 2, 3 * sec, 0},
		{4, 0, 1, 1, 4 * sec, 0},
		{5, 0, 1, 0, 5 * sec, 0},
		{6, 0, 1, 0, 5 * sec, 1 * sec},
		{7, 3000 * ms, 1, 2, 3 * sec, 0},
		{8, 3100 * ms, 1, 1, 3900 * ms, 0},
		{9, 4000 * ms, 1, 1, 4 * sec, 0},
		{10, 8000 * ms, 1, 4, 1 * sec, 0},
		{11, 9500 * ms, 1, 4, 1 * sec, 0},
		{13, 9500 * ms, 2, 2, 3 * sec, 0},
		{14, 9500 * ms, 5, 2, 3 * sec, 3 * sec},
	}
	tat := int64(0)
	for _, r := range rows {
		now := epoch + r.at
		inc := r.cost * sec
		d := gcra.Charge(now, tat, inc, capacity)
		if d.Conform != (r.retry == 0) || d.Wait != r.retry {
			t.Fatalf("row %d: %+v, want conform %v, wait %dµs", r.row, d, r.retry == 0, r.retry)
		}
		if d.Conform {
			tat = d.TAT
		}
		reset, headroom := gcra.ResetAfter(now, tat), gcra.Headroom(now, tat, capacity)
		if reset != r.reset || headroom/sec != r.remaining {
			t.Errorf("row %d: reset %dµs, remaining %d (headroom %dµs); want reset %dµs, remaining %d",
				r.row, reset, headroom/sec, headroom, r.reset, r.remaining)
		}
		if headroom+reset != capacity {
			t.Errorf("row %d: headroom %d + reset %d != capacity %d", r.row, headroom, reset, capacity)
		}
		// A denial's wait is what the increment lacks of the headroom.
		if !d.Conform && d.Wait != inc-headroom {
			t.Errorf("row %d: wait %d, want increment − headroom = %d", r.row, d.Wait, inc-headroom)
		}
	}
}

func TestResetAfterHeadroom(t *testing.T) {
	tests := []struct {
		now, tat, capacity int64
		reset, headroom    int64
	}{
		{now: 10, tat: 0, capacity: 5, reset: 0, headroom: 5},  // absent bucket: full
		{now: 10, tat: 10, capacity: 5, reset: 0, headroom: 5}, // TAT now: full
		{now: 10, tat: 13, capacity: 5, reset: 3, headroom: 2}, // part used
		{now: 10, tat: 15, capacity: 5, reset: 5, headroom: 0}, // drained
		{now: 10, tat: 19, capacity: 5, reset: 9, headroom: 0}, // a lead past a smaller capacity
		{now: epoch, tat: epoch + 1, capacity: sec, reset: 1, headroom: sec - 1},
	}
	for _, tt := range tests {
		if got := gcra.ResetAfter(tt.now, tt.tat); got != tt.reset {
			t.Errorf("ResetAfter(%d, %d) = %d, want %d", tt.now, tt.tat, got, tt.reset)
		}
		if got := gcra.Headroom(tt.now, tt.tat, tt.capacity); got != tt.headroom {
			t.Errorf("Headroom(%d, %d, %d) = %d, want %d", tt.now, tt.tat, tt.capacity, got, tt.headroom)
		}
	}
}
