package conformance

import (
	"testing"
	"time"
)

// TestScaleRow: every time of throttled's table, at every scale G10 runs
// it at, is the table's time × increment / 1s.
func TestScaleRow(t *testing.T) {
	for _, inc := range throttledScales {
		for _, r := range throttledRows {
			for _, d := range []time.Duration{r.at, r.reset, r.retry} {
				want := time.Duration(float64(d) * inc.Seconds())
				if got := scaleRow(d, inc); got != want {
					t.Errorf("row %d: %v at increment %v: %v, want %v", r.row, d, inc, got, want)
				}
			}
		}
	}
}
