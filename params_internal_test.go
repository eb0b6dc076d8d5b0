package fleetstore

import (
	"net/url"
	"strings"
	"testing"

	"github.com/fleetstore/fleetstore/driver"
)

// TestCommonParamsListed: the parameters a driver's unknown-parameter
// error lists as accepted (driver.CheckParams) include every common one
// the Store reads, so that the error names each parameter that works.
func TestCommonParamsListed(t *testing.T) {
	err := driver.CheckParams(url.Values{"no_such": {"1"}})
	if err == nil {
		t.Fatal("CheckParams accepted an unknown parameter")
	}
	for _, k := range append([]string{"timeout", "key_prefix"}, fallbackParams...) {
		if !strings.Contains(err.Error(), k+",") && !strings.HasSuffix(err.Error(), k+")") {
			t.Errorf("the unknown-parameter error does not list %s: %v", k, err)
		}
	}
}
