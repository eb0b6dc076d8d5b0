// Package storeaccess reaches into a *fleetstore.Store for this
// repository's own packages: the conformance suite and the drivers' tests
// read the Store's driver, which the public API does not hand out. The
// root package sets every function here in its init; the root cannot be
// imported from here (it imports this package).
package storeaccess

import "github.com/fleetstore/fleetstore/driver"

// Driver returns the driver a *fleetstore.Store was opened with (by Open
// or OpenDriver). store must be a *fleetstore.Store: another value panics.
var Driver func(store any) driver.Driver
