package conformance_test

import (
	"strings"
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

// TestOmit: a clause the config omits is reported SKIP with the reason,
// and does not run.
func TestOmit(t *testing.T) {
	reports, err := conformance.Check(conformance.Config{Driver: memory.New(nil), URL: "omit://x",
		Omit: map[string]string{"G1": "not for this store"}}, []string{"G1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(reports) != 1 || reports[0].Status != conformance.Skip || !strings.Contains(strings.Join(reports[0].Messages, " "), "not for this store") {
		t.Fatalf("omitted G1: %+v, want SKIP with the reason", reports)
	}
}
