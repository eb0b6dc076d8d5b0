package valkey

import (
	"context"

	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/internal/reach"
	"github.com/fleetstore/fleetstore/internal/scripts"
)

// conn is one open Valkey store: a lazily built valkey-go client (single
// server or cluster, as valkey-go finds when it connects).
type conn struct {
	lazy   *lazyClient
	prefix string
	reach  *reach.Log // logs an outage once, and its end
}

var _ driver.Conn = (*conn)(nil)

func newConn(cfg driver.Config, o *options) *conn {
	return &conn{lazy: newLazyClient(o.client), prefix: cfg.KeyPrefix, reach: reach.New(cfg.Logger, "valkey", o.display)}
}

// Hit implements driver.Conn: one call of the hit script (CONTRACT §3–§4).
// Its keys are one tenant's, so one hash tag and one cluster slot.
func (c *conn) Hit(ctx context.Context, charges []driver.Charge, claim *driver.Claim) (driver.Result, error) {
	cl, err := c.lazy.get(ctx)
	if err != nil {
		return driver.Result{}, c.failed(ctx, err)
	}
	keys, args := scripts.HitCall(c.prefix, charges, claim)
	reply, err := run(ctx, cl, scripts.Hit, keys, args)
	if err != nil {
		return driver.Result{}, c.failed(ctx, err)
	}
	c.answered()
	return scripts.DecodeHit(reply)
}

// Commit implements driver.Conn (C5–C8, C10).
func (c *conn) Commit(ctx context.Context, claims []driver.Claim) []error {
	return c.settle(ctx, true, claims)
}

// Release implements driver.Conn (C5–C8, C10).
func (c *conn) Release(ctx context.Context, claims []driver.Claim) []error {
	return c.settle(ctx, false, claims)
}

// settle runs the settle script once per tenant (one hash tag, one slot
// each), all in one DoMulti: one round trip per node. Grouping by tenant
// on a single server too means a call never spans two slots, whether or
// not the server turns out to be a cluster node.
func (c *conn) settle(ctx context.Context, commit bool, claims []driver.Claim) []error {
	cl, err := c.lazy.get(ctx)
	if err != nil {
		err = c.failed(ctx, err)
		errs := make([]error, len(claims))
		for i := range errs {
			errs[i] = err // one value: the Store says it once
		}
		return errs
	}
	groups := scripts.GroupByTenant(claims)
	calls := scripts.SettleCalls(c.prefix, commit, claims, groups)
	runAll(ctx, cl, scripts.Settle, calls)
	errs, reached := scripts.SettleErrors(calls, groups, len(claims), func(err error) error { return c.failed(ctx, err) })
	if reached {
		c.answered()
	}
	return errs
}

// Reset implements driver.Conn: one DEL of the tenant's bucket hash (G5).
func (c *conn) Reset(ctx context.Context, tenant string) error {
	cl, err := c.lazy.get(ctx)
	if err != nil {
		return c.failed(ctx, err)
	}
	if err := cl.Do(ctx, cl.B().Del().Key(scripts.BucketKey(c.prefix, tenant)).Build()).Error(); err != nil {
		return c.failed(ctx, err)
	}
	c.answered()
	return nil
}

// Ping implements driver.Conn: PING on one node.
func (c *conn) Ping(ctx context.Context) error {
	cl, err := c.lazy.get(ctx)
	if err != nil {
		return c.failed(ctx, err)
	}
	if err := cl.Do(ctx, cl.B().Ping().Build()).Error(); err != nil {
		return c.failed(ctx, err)
	}
	c.answered()
	return nil
}

// Close implements driver.Conn: it stops a build in flight and closes
// every connection and goroutine of the client (T4).
func (c *conn) Close() error {
	c.lazy.close()
	return nil
}
