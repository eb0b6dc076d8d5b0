package fleetstore

import (
	"sort"
	"sync"

	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/drivers/memory"
)

var (
	driversMu sync.RWMutex
	drivers   = make(map[string]driver.Driver)
)

func init() {
	Register("memory", memory.Default)
}

// Register makes a driver available by URL scheme. It is called from a
// driver package's init function. Register panics on an empty scheme, one
// that is not a URL scheme ([a-z][a-z0-9+.-]*), a nil driver or a scheme
// registered twice, as database/sql's Register does.
func Register(scheme string, d driver.Driver) {
	driversMu.Lock()
	defer driversMu.Unlock()
	if scheme == "" {
		panic("fleetstore: Register with an empty scheme")
	}
	if !validScheme(scheme) {
		panic("fleetstore: Register scheme " + scheme + " is not a URL scheme ([a-z][a-z0-9+.-]*)")
	}
	if d == nil {
		panic("fleetstore: Register driver is nil")
	}
	if _, dup := drivers[scheme]; dup {
		panic("fleetstore: Register called twice for scheme " + scheme)
	}
	drivers[scheme] = d
}

// Drivers returns the registered schemes, sorted.
func Drivers() []string {
	driversMu.RLock()
	defer driversMu.RUnlock()
	list := make([]string, 0, len(drivers))
	for scheme := range drivers {
		list = append(list, scheme)
	}
	sort.Strings(list)
	return list
}

func lookup(scheme string) (driver.Driver, bool) {
	driversMu.RLock()
	defer driversMu.RUnlock()
	d, ok := drivers[scheme]
	return d, ok
}

// validScheme reports whether s can be the scheme of a parsed URL (RFC 3986,
// lower case as url.Parse returns it).
func validScheme(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z':
		case i > 0 && (c >= '0' && c <= '9' || c == '+' || c == '.' || c == '-'):
		default:
			return false
		}
	}
	return true
}
