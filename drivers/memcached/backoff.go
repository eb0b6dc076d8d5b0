package memcached

import (
	"context"
	"math/rand/v2"
	"time"
)

// backoff waits a random time before a retry after a conflict, growing
// with attempt up to 2ms, never past the deadline; it fails once the
// deadline has passed.
func backoff(ctx context.Context, op string, attempt int) error {
	if err := ctx.Err(); err != nil {
		return classify(ctx, op, err)
	}
	ceiling := 50 * time.Microsecond << min(attempt, 6)
	d := rand.N(min(ceiling, 2*time.Millisecond))
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d {
		d = time.Until(dl)
	}
	if d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return classify(ctx, op, ctx.Err())
		}
	}
	return nil
}
