package memcached

import (
	"context"

	"github.com/bradfitz/gomemcache/memcache"

	"github.com/fleetstore/fleetstore/claim"
	"github.com/fleetstore/fleetstore/driver"
)

// settle reads every claim at once (one round trip per server), then
// settles them one by one under CAS. A failure before any claim was
// settled is the whole call's.
func (c *conn) settle(ctx context.Context, op claim.Op, claims []driver.Claim) ([]error, error) {
	errs := make([]error, len(claims))
	s, done, err := c.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	keys := make([]string, len(claims))
	for i := range claims {
		keys[i] = c.keys.claim(claims[i].Tenant, claims[i].SourceID, claims[i].Key)
	}
	var items map[string]*memcache.Item
	err = readAgain(ctx, func() (err error) {
		items, err = s.mc.GetMulti(keys)
		return err
	})
	fresh := make(map[string]bool, len(keys)) // read and not written since
	reached := false                          // a claim was settled or answered
	if err != nil {
		if ctx.Err() != nil {
			return nil, classify(ctx, op.String(), err)
		}
		// A server failed: read each claim on its own, so that those on
		// the others still settle.
	} else {
		for _, k := range keys {
			fresh[k] = true
		}
	}
	for i := range claims {
		k := keys[i]
		var it *memcache.Item
		if fresh[k] {
			it = items[k]
		}
		errs[i] = c.settleOne(ctx, s, op, &claims[i], k, it, fresh[k])
		fresh[k] = false
		reached = reached || errs[i] == nil || isOutcome(errs[i])
		if ctx.Err() != nil && errs[i] != nil && !isOutcome(errs[i]) {
			for j := i + 1; j < len(errs); j++ {
				errs[j] = errs[i] // the deadline reached these too
			}
			break
		}
	}
	if !reached {
		return nil, errs[0] // no claim reached a server: the whole call failed (T2)
	}
	return errs, nil
}

func isOutcome(err error) bool {
	_, lost := err.(*driver.ClaimLostError)
	return lost || err == driver.ErrAlreadyCommitted
}

// settleOne settles one claim whose item was read as it (nil: absent) when
// read is true; otherwise it reads it first.
func (c *conn) settleOne(
	ctx context.Context, s *session, op claim.Op, cl *driver.Claim,
	key string, it *memcache.Item, read bool,
) error {
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			if err := backoff(ctx, op.String(), attempt); err != nil {
				return err
			}
		}
		if !read {
			err := readAgain(ctx, func() (err error) {
				it, err = s.mc.Get(key)
				if err == memcache.ErrCacheMiss {
					it, err = nil, nil
				}
				return err
			})
			if err != nil {
				return classify(ctx, op.String(), err)
			}
		}
		read = false
		now := c.now()
		var held claim.State
		if it != nil {
			var err error
			if held, err = parseClaim(it.Value); err != nil {
				return malformed(key, err)
			}
		}
		var next *memcache.Item
		st := claim.Settle(held, now, op, cl.HookID, cl.TTL.Microseconds())
		switch st.Write {
		case claim.Store:
			val := encodeClaim(claim.State{
				Phase: claim.Committed, HookID: cl.HookID, Node: cl.Node, Expires: st.Expires,
			})
			next = &memcache.Item{Key: key, Value: val, Expiration: expiration(now, st.Expires)}
		case claim.Delete:
			next = &memcache.Item{Key: key, Expiration: -1} // expires at once
		default:
			return st.Err
		}
		var err error
		if it == nil {
			err = s.mc.Add(next)
		} else {
			next.CasID = it.CasID
			err = s.mc.CompareAndSwap(next)
		}
		switch {
		case err == nil:
			return nil
		case conflict(err):
			continue
		default:
			return classify(ctx, op.String(), err)
		}
	}
}
