package memcached

import (
	"context"
	"hash/maphash"
)

// stripes queue the Hits of one Conn on a tenant's bucket: calls that
// charge the same tenant from one process take turns instead of racing
// each other's cas (a lost cas costs two more round trips, and under a hot
// tenant most would lose). Other processes still meet under cas. A stripe
// is a one-slot semaphore that a waiter leaves at its deadline.
type stripes struct {
	seed  maphash.Seed
	slots [1024]chan struct{}
}

func newStripes() *stripes {
	s := &stripes{seed: maphash.MakeSeed()}
	for i := range s.slots {
		s.slots[i] = make(chan struct{}, 1)
	}
	return s
}

// lock takes tenant's stripe, or fails when ctx ends first; unlock
// releases it.
func (s *stripes) lock(ctx context.Context, tenant string) (unlock func(), err error) {
	slot := s.slots[maphash.String(s.seed, tenant)%uint64(len(s.slots))]
	select {
	case slot <- struct{}{}:
		return func() { <-slot }, nil
	case <-ctx.Done():
		return nil, classify(ctx, "hit: wait for the tenant's turn", ctx.Err())
	}
}
