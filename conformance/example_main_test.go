package conformance_test

import (
	"github.com/fleetstore/fleetstore/conformance"
	"github.com/fleetstore/fleetstore/drivers/memory"
)

// The check of a driver kept outside this module, as its own command:
// "go run ./cmd/mycheck mine://x" prints PASS, FAIL or SKIP for every
// clause, as fleetstore check does (memory.New stands for your driver).
func ExampleMain() {
	conformance.Main(conformance.Config{Driver: memory.New(nil)})
}
