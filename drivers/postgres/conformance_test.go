package postgres

import (
	"testing"

	"github.com/fleetstore/fleetstore/conformance"
	"github.com/fleetstore/fleetstore/internal/testserver"
)

// TestConformance runs the whole conformance suite against one
// PostgreSQL cluster of its own, the schema installed by the first call.
func TestConformance(t *testing.T) {
	t.Parallel()
	srv := testserver.StartPostgres(t)
	conformance.Run(t, conformance.Config{
		URL:     srv.URL(),
		Records: records(adminPool(t, srv)),
		Restart: srv.Restart,
	})
}
