package memcached

import (
	"errors"

	"github.com/fleetstore/fleetstore/driver"
)

// errOutside is a window charge's error when none of its three windows
// holds the driver's now (CONTRACT §3.2): the node that built the charge
// reads a clock more than a window away from this driver's. It is marked
// ErrorReply, as the scripts' answer is, and nothing is written.
var errOutside = driver.ErrorReply(errors.New(
	"memcached: quota window: the store's clock is outside the windows sent"))

// windowAt returns the window of w that holds now (µs): [start, end).
func windowAt(w *driver.Window, now int64) (start, end int64, ok bool) {
	for i := range 3 {
		if w.Edges[i] <= now && now < w.Edges[i+1] {
			return w.Edges[i], w.Edges[i+1], true
		}
	}
	return 0, 0, false
}

// window returns the index in b.wins of kind's window that starts at
// start, and false when it is absent or has passed at now.
func (b *bucketState) window(kind string, start, now int64) (int, bool) {
	for i, w := range b.wins {
		if w.kind == kind && w.start == start && w.end > now {
			return i, true
		}
	}
	return 0, false
}
