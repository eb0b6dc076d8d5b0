package driver_test

import (
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/internal/urlparam"
)

// TestCheckParamsListsStoreParams: the unknown-parameter error names the
// parameter and lists as accepted every one the Store reads (timeout,
// key_prefix, fallback_*) and the driver's own.
func TestCheckParamsListsStoreParams(t *testing.T) {
	err := driver.CheckParams(url.Values{"no_such": {"1"}, "db": {"0"}}, "db")
	if !errors.Is(err, driver.ErrInvalid) || !strings.Contains(err.Error(), "no_such") {
		t.Fatalf("CheckParams: %v, want ErrInvalid naming no_such", err)
	}
	for _, k := range slices.Concat(urlparam.Store, []string{"db"}) {
		if !strings.Contains(err.Error(), k+",") && !strings.HasSuffix(err.Error(), k+")") {
			t.Errorf("the unknown-parameter error does not list %s: %v", k, err)
		}
	}
	if err := driver.CheckParams(url.Values{"db": {"0"}}, "db"); err != nil {
		t.Errorf("CheckParams of an accepted parameter: %v", err)
	}
}
