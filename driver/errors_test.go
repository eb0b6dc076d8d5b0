package driver_test

import (
	"strings"
	"testing"

	"github.com/fleetstore/fleetstore/driver"
)

// TestClaimErrorCut: a ClaimError names its claim's tenant, source_id and
// key each cut to 64 characters (ClaimError's doc), so that an error of a
// batch of long keys stays readable.
func TestClaimErrorCut(t *testing.T) {
	e := &driver.ClaimError{Index: 3, Tenant: strings.Repeat("t", 1024),
		SourceID: strings.Repeat("s", 1024), Key: strings.Repeat("k", 1024), Err: driver.ErrClaimLost}
	msg := e.Error()
	for _, c := range []string{"t", "s", "k"} {
		if !strings.Contains(msg, strings.Repeat(c, 64)) || strings.Contains(msg, strings.Repeat(c, 65)) {
			t.Errorf("%q in %q: want cut to 64", c, msg)
		}
	}
	if !strings.HasPrefix(msg, "claims[3] ") {
		t.Errorf("message %q does not name the index", msg)
	}
}
