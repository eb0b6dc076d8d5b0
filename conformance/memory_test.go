package conformance_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore/conformance"
	"github.com/fleetstore/fleetstore/drivers/memory"
)

// TestMemory proves the built-in memory driver, the reference, on a clock
// the suite moves instead of sleeping. TestConformance runs it on the
// wall clock.
func TestMemory(t *testing.T) {
	clock := newManualClock()
	d := memory.New(clock.micros)
	conformance.Run(t, conformance.Config{
		Driver:  d,
		URL:     "memory://conformance",
		Records: d.Records,
		Clock:   clock,
	})
}

// manualClock is a conformance.Clock and a memory.Clock at once: it
// stands still until Sleep moves it.
type manualClock struct{ us atomic.Int64 }

func newManualClock() *manualClock {
	c := &manualClock{}
	c.us.Store(time.Now().UnixMicro())
	return c
}

func (c *manualClock) micros() int64  { return c.us.Load() }
func (c *manualClock) Now() time.Time { return time.UnixMicro(c.us.Load()) }

// Sleep moves the clock on by d, rounded up to a whole µs.
func (c *manualClock) Sleep(d time.Duration) {
	if d > 0 {
		c.us.Add(int64((d + time.Microsecond - 1) / time.Microsecond))
	}
}
