package memcached

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bradfitz/gomemcache/memcache"
	"go.uber.org/zap"

	"github.com/fleetstore/fleetstore/claim"
	"github.com/fleetstore/fleetstore/driver"
)

type conn struct {
	keys    keys
	sv      *servers
	pool    *pool
	now     func() int64 // client wall clock, µs
	log     *zap.Logger
	turns   *stripes
	timeout time.Duration

	// The settings check (settings.go): checked once every server was
	// read, seen the servers read (touched by the one check running).
	checked, checking atomic.Bool
	seen              map[string]bool

	// bg is cancelled by Close; the settings check runs under it and
	// Close waits for it (T4).
	bg     context.Context
	stopBG context.CancelFunc
	wg     sync.WaitGroup
}

var _ driver.Conn = (*conn)(nil)

func wallMicros() int64 { return time.Now().UnixMicro() }

// begin resolves the servers and takes a session for one call, waiting
// for one while max_conns are in use, no longer than ctx.
func (c *conn) begin(ctx context.Context) (*session, func(), error) {
	if err := c.sv.resolve(ctx); err != nil {
		return nil, nil, err
	}
	return c.pool.acquire(ctx)
}

// Hit implements driver.Conn by the protocol of the package doc.
func (c *conn) Hit(
	ctx context.Context, charges []driver.Charge, cl *driver.Claim,
) (driver.Result, error) {
	if len(charges) > 0 {
		unlock, err := c.turns.lock(ctx, charges[0].Tenant)
		if err != nil {
			return driver.Result{}, err
		}
		defer unlock()
	}
	s, done, err := c.begin(ctx)
	if err != nil {
		return driver.Result{}, err
	}
	defer done()
	h := hit{c: c, s: s, ctx: ctx, charges: charges, claim: cl}
	if len(charges) > 0 {
		h.bk = c.keys.bucket(charges[0].Tenant)
	}
	if cl != nil {
		h.ck = c.keys.claim(cl.Tenant, cl.SourceID, cl.Key)
	}
	res, err := h.run()
	if err == nil {
		c.answered()
	}
	return res, err
}

// Commit implements driver.Conn (C5–C8).
func (c *conn) Commit(ctx context.Context, claims []driver.Claim) ([]error, error) {
	return c.settle(ctx, claim.Commit, claims)
}

// Release implements driver.Conn (C5–C8).
func (c *conn) Release(ctx context.Context, claims []driver.Claim) ([]error, error) {
	return c.settle(ctx, claim.Release, claims)
}

// Reset implements driver.Conn: one delete of the tenant's bucket item.
func (c *conn) Reset(ctx context.Context, tenant string) error {
	s, done, err := c.begin(ctx)
	if err != nil {
		return err
	}
	defer done()
	err = readAgain(ctx, func() error { return s.mc.Delete(c.keys.bucket(tenant)) })
	if err != nil && err != memcache.ErrCacheMiss {
		return classify(ctx, "reset", err)
	}
	return nil
}

// Ping implements driver.Conn: a version command to every server.
func (c *conn) Ping(ctx context.Context) error {
	s, done, err := c.begin(ctx)
	if err != nil {
		return err
	}
	defer done()
	if err := readAgain(ctx, s.mc.Ping); err != nil {
		return classify(ctx, "ping", err)
	}
	return nil
}

// Close implements driver.Conn: the settings check stops, every idle
// socket is closed and every caller waiting for a session returns
// ErrClosed; a session in use (there is none when the Store calls Close)
// closes on release.
func (c *conn) Close() error {
	c.stopBG()
	c.wg.Wait()
	c.pool.close()
	return nil
}
