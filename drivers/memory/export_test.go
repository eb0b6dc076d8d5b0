package memory

import "github.com/fleetstore/fleetstore/driver"

// The implementation's own methods, for this package's tests.

func (d *Driver) Size(name, keyPrefix string) (buckets, claims int) {
	return d.d.Size(name, keyPrefix)
}

func (d *Driver) Forget(name, keyPrefix string, claims ...driver.Claim) int {
	return d.d.Forget(name, keyPrefix, claims...)
}

func (d *Driver) Quota(name, keyPrefix string, charges []driver.Charge, r *driver.Result) {
	d.d.Quota(name, keyPrefix, charges, r)
}
