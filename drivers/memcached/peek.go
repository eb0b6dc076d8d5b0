package memcached

import (
	"context"
	"time"

	"github.com/bradfitz/gomemcache/memcache"

	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/gcra"
)

var _ driver.Peeker = (*conn)(nil)

// Peek implements driver.Peeker (CONTRACT G11): one get of the tenant's
// bucket item, its TATs and quota windows read at the client's now (G8,
// CONTRACT §3.2). A get writes nothing and moves no expiry (only touch
// and gat do); it is sent once more, as every read is, only on a pooled
// socket the server had closed.
func (c *conn) Peek(ctx context.Context, charges []driver.Charge) (driver.Result, error) {
	s, done, err := c.begin(ctx)
	if err != nil {
		return driver.Result{}, err
	}
	defer done()
	key := c.keys.bucket(charges[0].Tenant)
	var it *memcache.Item
	err = readAgain(ctx, func() error {
		var err error
		it, err = s.mc.Get(key)
		if err == memcache.ErrCacheMiss {
			it, err = nil, nil // no bucket: every one full
		}
		return err
	})
	if err != nil {
		return driver.Result{}, classify(ctx, "peek", err)
	}
	var b bucketState
	if it != nil {
		if b, err = parseBucket(it.Value); err != nil {
			return driver.Result{}, malformed(key, err)
		}
	}
	now := c.now()
	res := driver.Result{NBuckets: len(charges)}
	for i := range charges {
		ch := &charges[i]
		if ch.IsWindow() {
			start, end, ok := windowAt(&ch.Window, now)
			if !ok {
				return driver.Result{}, errOutside
			}
			if j, ok := b.window(string(ch.Kind), start, now); ok {
				res.Buckets[i].Used = b.wins[j].used
			}
			res.Buckets[i].ResetAfter = time.Duration(end-now) * time.Microsecond
			continue
		}
		for _, kt := range b.tats {
			if kt.kind == string(ch.Kind) {
				lead := gcra.ResetAfter(now, kt.tat)
				res.Buckets[i].ResetAfter = time.Duration(lead) * time.Microsecond
			}
		}
	}
	return res, nil
}
