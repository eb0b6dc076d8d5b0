package memstore

import (
	"errors"

	"github.com/fleetstore/fleetstore/calendar"
	"github.com/fleetstore/fleetstore/driver"
)

// tenantWindows holds the counts of a tenant's quota windows (CONTRACT
// §3.2): one record per tenant, so that Reset is one delete.
type tenantWindows struct {
	counts  []windowCount
	expires int64 // µs: the latest window end; the record is dead after it
}

// windowCount is the count of one window of one kind, keyed by its start.
type windowCount struct {
	kind       string
	start, end int64 // µs
	used       int64
}

// errOutside is a window charge whose three windows do not hold the
// store's clock: the node's clock is off by more than a window.
var errOutside = driver.ErrorReply(errors.New(
	"quota window: the store's clock is outside the windows sent"))

// window returns the edges of the window of ch, a window charge, that
// holds now: errOutside when none does.
func window(ch *driver.Charge, now int64) (start, end int64, err error) {
	k := calendar.Holding(ch.Window.Edges, now)
	if k < 0 {
		return 0, 0, errOutside
	}
	return ch.Window.Edges[k], ch.Window.Edges[k+1], nil
}

// used returns the count of kind's window starting at start (0: absent
// or ended).
func (w *tenantWindows) used(kind string, start, now int64) int64 {
	if w == nil || w.expires <= now {
		return 0
	}
	for _, c := range w.counts {
		if c.kind == kind && c.start == start && c.end > now {
			return c.used
		}
	}
	return 0
}

// set stores the count of kind's window [start, end), dropping the
// windows that have ended. A window of kind that starts at start takes
// end: a plan that changes the kind's period at an instant where both
// periods start counts the same units, up to the new period's end.
func (w *tenantWindows) set(kind string, start, end, used, now int64) {
	old := w.counts
	live := old[:0]
	found := false
	for _, c := range w.counts {
		if c.end <= now {
			continue
		}
		if c.kind == kind && c.start == start {
			c.used, c.end, found = used, end, true
		}
		live = append(live, c)
	}
	if !found {
		live = append(live, windowCount{kind: kind, start: start, end: end, used: used})
	}
	if len(live) < len(old) {
		clear(old[len(live):]) // the ended windows' kinds, for the collector
	}
	w.counts = live
	w.expires = 0
	for _, c := range w.counts {
		w.expires = max(w.expires, c.end)
	}
}
