// Package conformance is the public conformance suite of fleetstore: every
// numbered clause of the contract (G1–G11, Q1–Q6, C1–C10, T1–T6, V1–V4),
// the file CONTRACT.md at the root of the module's repository, as a
// subtest of Run named by its id. A driver author proves a driver with one short test,
// registering nothing:
//
//	import (
//		"testing"
//
//		"example.com/mystore"
//		"github.com/fleetstore/fleetstore/conformance"
//	)
//
//	func TestConformance(t *testing.T) {
//		srv := startServer(t) // a live server of your own, stopped by t.Cleanup
//		conformance.Run(t, conformance.Config{
//			Driver:  mystore.Driver{},
//			URL:     "mystore://" + srv.Addr,
//			Records: srv.Records, // optional: lets G7, C9 and Q5 see each record's expiry
//		})
//	}
//
// The suite aims copies of the URL, its host swapped, at listeners of its
// own (set Config.AddrURL when swapping the host is not enough). A driver
// whose records may outlive their expiry by more than 1ms says by how
// much with driver.ExpiryGranularity. This package's
// example_driver_test.go is this test, for the memory driver.
//
// The clauses that sleep run at once, and the timing clauses T1–T5 one
// after another, alone. Tests of several configurations may call Run at
// once (t.Parallel): the timing clauses of one run with no clause of
// another beside them, and T4 counts only the goroutines its own Store
// started (a pprof label). A driver whose store time the test controls
// offers a Config.Clock, which the suite moves instead of sleeping.
//
// The same clause code runs outside go test through Check, which the
// fleetstore command's check subcommand uses, and through Main, a driver's
// own check command. A clause that does not end within
// Config.ClauseTimeout is reported FAIL by name, with the suite's stacks.
package conformance
