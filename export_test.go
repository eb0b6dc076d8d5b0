package fleetstore

import (
	"time"

	"github.com/fleetstore/fleetstore/internal/degraded"
	"github.com/fleetstore/fleetstore/internal/memstore"
)

// WithLocalClock runs the fallback's local store on clock (µs): the
// degraded-mode tests drive its buckets by an injected time.
func WithLocalClock(clock memstore.Clock) Option {
	return func(o *options) { o.localClock = clock }
}

// ShareCharge is the local share arithmetic for nodes (> 0) or share.
func ShareCharge(nodes int, frac float64, c Charge) (Charge, bool) {
	if nodes > 0 {
		return degraded.OfNodes(nodes).Charge(c), true
	}
	s, ok := degraded.OfFraction(frac)
	if !ok {
		return Charge{}, false
	}
	return s.Charge(c), true
}

// LocalClaims is how many claims s's local store holds, swept or not.
func LocalClaims(s *Store) int {
	return s.fb.(*degraded.Conn).LocalClaims()
}

// SetNow makes s read the time from now (the outage log's quiet period).
func SetNow(s *Store, now func() time.Time) { s.now = now }

// ConflictLogBurst is how many replay conflicts are logged before the
// conflict log's bucket holds them back.
const ConflictLogBurst = degraded.ConflictLogBurst
