package degraded

import (
	"context"

	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/internal/checked"
)

// Peek is Store.Peek with the fallback, after validation: answered by the
// shared store while the breaker is closed, by the local store once it is
// open or when this call fails for an outage (CONTRACT §8), as Hit. The
// Store calls it only when the shared store can Peek.
func (fb *Conn) Peek(ctx context.Context, charges []driver.Charge) (driver.Result, error) {
	if fb.breaker.isOpen.Load() {
		return fb.localPeek(charges), nil
	}
	ctx, cancel, err := fb.budget(ctx)
	if err != nil {
		return driver.Result{}, err
	}
	defer cancel()
	res, err := fb.shared.Peek(ctx, charges)
	if err == nil {
		return res, nil
	}
	if degrade, e := fb.failed(ctx, "peek", err); !degrade {
		return driver.Result{}, e
	}
	return fb.localPeek(charges), nil
}

// localPeek answers a Peek from the local store at this node's share of
// every limit: the buckets that decide this node's next local Hit, as
// localHit reports them.
func (fb *Conn) localPeek(charges []driver.Charge) driver.Result {
	bufp, local := fb.atShare(charges)
	defer fb.putShare(bufp, local)
	var res driver.Result
	fb.mem.Quota(localName, localPrefix, local, &res)
	_ = checked.PeekQuota(&res, local) // the local store's states: whole µs, within a capacity
	localHeadroom(&res, charges, local)
	res.Local = true
	return res
}
