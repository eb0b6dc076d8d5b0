package conformance_test

import (
	"context"
	"testing"

	"github.com/fleetstore/fleetstore/conformance"
	"github.com/fleetstore/fleetstore/drivers/memory"
)

// memoryRecords adapts a memory driver's Records for the suite (G7, C9).
func memoryRecords(d *memory.Driver, name string) func(context.Context, string, string) ([]conformance.Record, error) {
	return func(_ context.Context, prefix, tenant string) ([]conformance.Record, error) {
		var out []conformance.Record
		for _, r := range d.Records(name, prefix, tenant) {
			out = append(out, conformance.Record{Key: r.Key, TTL: r.TTL})
		}
		return out, nil
	}
}

// TestMemory proves the built-in memory driver, the reference.
func TestMemory(t *testing.T) {
	conformance.Run(t, conformance.Config{
		URL:     "memory://conformance",
		Records: memoryRecords(memory.Default, "conformance"),
	})
}
