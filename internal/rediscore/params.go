package rediscore

import (
	"maps"
	"net/url"
	"slices"

	"github.com/fleetstore/fleetstore/driver"
)

// CheckParams checks q's parameters against the URL forms of a
// Redis-family driver (one server, a cluster, a Sentinel-managed master):
// a parameter no form takes is refused listing every form's parameters
// (driver.CheckParams), one that this URL's form does not take is refused
// naming the form. Errors wrap ErrInvalid and name the parameter.
func CheckParams(q url.Values, form string, accepted []string, forms ...[]string) error {
	var all []string
	for _, f := range forms {
		for _, p := range f {
			if !slices.Contains(all, p) {
				all = append(all, p)
			}
		}
	}
	if err := driver.CheckParams(q, all...); err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(q)) {
		if !slices.Contains(accepted, name) {
			return driver.Invalid("url: "+name, "not a parameter of a "+form+" URL")
		}
	}
	return nil
}
