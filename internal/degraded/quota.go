package degraded

import (
	"math/bits"
	"time"

	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/internal/checked"
)

// localQuota is checked.FillQuota for a Hit decided locally (CONTRACT
// §8) on local, the charges at this node's share of shared (localHeadroom).
func localQuota(r *driver.Result, shared, local []driver.Charge) error {
	if err := checked.FillQuota(r, local); err != nil {
		return err
	}
	localHeadroom(r, shared, local)
	return nil
}

// localHeadroom turns the headroom of local buckets, those of local, the
// charges at this node's share of shared, into the shared charges' terms:
// ResetAfter and Denied stay as they stand, Headroom becomes headroom ×
// I/I' rounded down (the local bucket holds floor(headroom'/I') of the
// fleet's charges of I), so that turning it into units by the shared
// limit never over-states what this node has left.
func localHeadroom(r *driver.Result, shared, local []driver.Charge) {
	for i := range shared {
		b := &r.Buckets[i]
		inc := uint64(shared[i].Increment / time.Microsecond)
		localInc := uint64(local[i].Increment / time.Microsecond)
		if inc >= localInc {
			continue // a share of 1: the same bucket
		}
		hi, lo := bits.Mul64(uint64(b.Headroom/time.Microsecond), inc)
		q, _ := bits.Div64(hi, lo, localInc) // < headroom: fits (inc < localInc)
		b.Headroom = time.Duration(q) * time.Microsecond
	}
}
