// Package conformance is the public conformance suite of fleetstore: every
// numbered clause of the contract (G1–G9, C1–C10, T1–T6, V1–V4), the file
// CONTRACT.md at the root of the module's repository, as a subtest of Run
// named by its id. A driver author proves a driver with one short test:
//
//	func TestConformance(t *testing.T) {
//		addr := startServer(t) // a live server of your own
//		conformance.Run(t, conformance.Config{
//			URL:     "mystore://" + addr,
//			AddrURL: func(a string) string { return "mystore://" + a },
//		})
//	}
//
// The same clause code runs outside go test through Check, which the
// fleetstore command's check subcommand uses.
package conformance
