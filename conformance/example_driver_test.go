package conformance_test

import (
	"testing"

	"github.com/fleetstore/fleetstore/conformance"
	"github.com/fleetstore/fleetstore/drivers/memory"
)

// TestConformance is the driver author's test of the package doc and the
// README, for the memory driver on the wall clock: a driver value and a
// URL, no scheme registered (mine:// is not), every sleep real.
func TestConformance(t *testing.T) {
	d := memory.New(nil) // the live store: in-process, nothing to start
	conformance.Run(t, conformance.Config{
		Driver:  d,
		URL:     "mine://x", // not a registered scheme: Config.Driver opens it
		Records: d.Records,  // optional: lets G7 and C9 see each record's expiry
	})
}
