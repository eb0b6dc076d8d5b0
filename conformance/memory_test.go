package conformance_test

import (
	"testing"

	"github.com/fleetstore/fleetstore/conformance"
	"github.com/fleetstore/fleetstore/drivers/memory"
)

// TestMemory proves the built-in memory driver, the reference.
func TestMemory(t *testing.T) {
	conformance.Run(t, conformance.Config{
		URL:     "memory://conformance",
		Records: memory.Default.Records,
	})
}
