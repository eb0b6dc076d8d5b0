package degraded

import (
	"context"

	"github.com/fleetstore/fleetstore/driver"
)

// Peek is Store.Peek with the fallback, after validation: answered by the
// shared store while the breaker is closed, by the local store once it is
// open or when this call fails for an outage (CONTRACT §8), as Hit. The
// Store calls it only when the shared store can Peek.
func (fb *Conn) Peek(ctx context.Context, charges []driver.Charge) (driver.Result, error) {
	if fb.breaker.isOpen.Load() {
		return fb.local.peek(charges), nil
	}
	ctx, cancel, err := fb.budget(ctx)
	if err != nil {
		return driver.Result{}, err
	}
	defer cancel()
	res, err := fb.shared.Peek(ctx, charges)
	if err == nil {
		fb.local.windows.saw(charges, &res)
		return res, nil
	}
	if degrade, e := fb.failed(ctx, "peek", err); !degrade {
		return driver.Result{}, e
	}
	return fb.local.peek(charges), nil
}
