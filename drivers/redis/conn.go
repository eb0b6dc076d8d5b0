package redis

import (
	"context"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/internal/reach"
	"github.com/fleetstore/fleetstore/internal/scripts"
)

// conn is one open Redis store: a go-redis client (single or cluster) and
// the bookkeeping of its log lines.
type conn struct {
	client  goredis.UniversalClient
	cluster bool
	prefix  string
	timeout time.Duration
	log     *zap.Logger
	display string     // redacted URL
	reach   *reach.Log // logs an outage once, and its end

	health health

	// bg is canceled by Close; every background check runs under it and
	// Close waits for them (T4).
	bg     context.Context
	stopBG context.CancelFunc
	wg     sync.WaitGroup
}

var _ driver.Conn = (*conn)(nil)

func newConn(cfg driver.Config, o *options) *conn {
	c := &conn{prefix: cfg.KeyPrefix, timeout: cfg.Timeout, log: cfg.Logger, display: o.display,
		reach: reach.New(cfg.Logger, "redis", o.display)}
	if o.cluster != nil {
		c.client, c.cluster = goredis.NewClusterClient(o.cluster), true
	} else {
		c.client = goredis.NewClient(o.single)
	}
	c.bg, c.stopBG = context.WithCancel(context.Background())
	return c
}

// Hit implements driver.Conn: one call of the hit script (CONTRACT §3–§4).
func (c *conn) Hit(ctx context.Context, charges []driver.Charge, claim *driver.Claim) (driver.Result, error) {
	keys, args := scripts.HitCall(c.prefix, charges, claim)
	reply, err := c.run(ctx, scripts.Hit, keys, args)
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

// settle runs the settle script: once over every claim on a single
// server; on a cluster once per tenant (one hash slot each), all in one
// pipeline, which go-redis sends as one round trip per node.
func (c *conn) settle(ctx context.Context, commit bool, claims []driver.Claim) []error {
	groups := [][]int{make([]int, len(claims))}
	if c.cluster {
		groups = scripts.GroupByTenant(claims)
	} else {
		for i := range claims {
			groups[0][i] = i
		}
	}
	calls := scripts.SettleCalls(c.prefix, commit, claims, groups)
	c.runAll(ctx, scripts.Settle, calls)
	errs, reached := scripts.SettleErrors(calls, groups, len(claims), func(err error) error { return c.failed(ctx, err) })
	if reached {
		c.answered()
	}
	return errs
}

// Reset implements driver.Conn: one DEL of the tenant's bucket hash (G5).
func (c *conn) Reset(ctx context.Context, tenant string) error {
	if err := c.client.Del(ctx, scripts.BucketKey(c.prefix, tenant)).Err(); err != nil {
		return c.failed(ctx, err)
	}
	c.answered()
	return nil
}

// Ping implements driver.Conn.
func (c *conn) Ping(ctx context.Context) error {
	if err := c.client.Ping(ctx).Err(); err != nil {
		return c.failed(ctx, err)
	}
	c.answered()
	return nil
}

// Close implements driver.Conn: it stops the background check, waits for
// it, and closes every connection.
func (c *conn) Close() error {
	c.stopBG()
	c.wg.Wait()
	return c.client.Close()
}
