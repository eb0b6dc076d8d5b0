package postgres

import (
	"testing"

	"github.com/fleetstore/fleetstore/conformance"
	"github.com/fleetstore/fleetstore/internal/testing/testserver"
)

// TestConformance runs the whole conformance suite against one
// PostgreSQL cluster of its own, the schema installed by the first call.
// The package's other tests each start a cluster too and run one after
// another, before the two conformance configurations run at once: a
// cluster's start (initdb, a server and its backends) takes the cores
// that the suite's 100ms budgets need.
// serialWhy: a Store's first call costs a connect (a backend forked)
// and a compile of the plpgsql function in that backend, about 40ms and
// 27ms on the loaded 2-core test machine against 0.3ms for a warm Hit.
// Clauses run at once open dozens of Stores together, whose first calls
// then outlast the 100ms budget; one clause at a time, they do not.
func TestConformance(t *testing.T) {
	t.Parallel()
	srv := testserver.StartPostgres(t)
	conformance.Run(t, conformance.Config{
		URL:     srv.URL(),
		Records: records(adminPool(t, srv)),
		Restart: srv.Restart,
		Serial:  true, // see serialWhy
	})
}

// TestConformanceFallback runs the suite on a Store with a fallback
// (fallback_nodes=3, CONTRACT §8) on a healthy server: while the shared
// store answers, the degraded mode changes nothing. T1, T2 and V4 aim the
// Store at a dead, refused or lying address, which the fallback turns into
// local decisions.
func TestConformanceFallback(t *testing.T) {
	t.Parallel()
	const local = "with a fallback, a dead, refused or lying store is a local decision (CONTRACT §8)"
	srv := testserver.StartPostgres(t)
	conformance.Run(t, conformance.Config{
		URL:     srv.URL() + "&fallback_nodes=3",
		Records: records(adminPool(t, srv)),
		Restart: srv.Restart,
		Omit:    map[string]string{"T1": local, "T2": local, "V4": local},
		Serial:  true, // see serialWhy
	})
}
