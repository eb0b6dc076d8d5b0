package memcached

import (
	"bytes"
	"context"
	"math/rand/v2"
	"time"

	"github.com/bradfitz/gomemcache/memcache"
	"go.uber.org/zap"

	"github.com/fleetstore/fleetstore/claim"
	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/gcra"
)

type conn struct {
	keys  keys
	sv    *servers
	pool  *pool
	now   func() int64 // client wall clock, µs
	log   *zap.Logger
	turns *stripes
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
func (c *conn) Hit(ctx context.Context, charges []driver.Charge, claim *driver.Claim) (driver.Result, error) {
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
	h := hit{c: c, s: s, ctx: ctx, charges: charges, claim: claim}
	if len(charges) > 0 {
		h.bk = c.keys.bucket(charges[0].Tenant)
	}
	if claim != nil {
		h.ck = c.keys.claim(claim.Tenant, claim.SourceID, claim.Key)
	}
	return h.run()
}

// hit is the state of one Hit.
type hit struct {
	c       *conn
	s       *session
	ctx     context.Context
	charges []driver.Charge
	claim   *driver.Claim
	bk, ck  string // bucket and claim keys ("" when absent)

	bucket *memcache.Item // as last read; nil: absent
	citem  *memcache.Item // as last read; nil: absent
	mine   []byte         // the pending claim this call wrote, while it holds it
}

func (h *hit) run() (driver.Result, error) {
	if err := h.read(h.bk, h.ck); err != nil {
		return driver.Result{}, err
	}
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			if err := h.backoff(attempt); err != nil {
				return driver.Result{}, err
			}
		}
		now := h.c.now()

		// 1. Our own pending claim: a retry of a hit whose reply was lost.
		var d claim.Decision
		if h.ck != "" && h.mine == nil && h.citem != nil {
			held, err := parseClaim(h.citem.Value)
			if err != nil {
				return driver.Result{}, malformed(h.ck, err)
			}
			d = claim.Hit(held, now, h.claim.HookID)
			if d.Verdict == claim.OwnRetry {
				return d.Result(), nil
			}
		}

		// 2. The charges: a denial writes nothing (and gives back the
		// claim this call took, if it took one before a bucket conflict).
		var tats []kindTAT
		var maxTAT int64
		if h.bk != "" {
			var wait int64
			var err error
			tats, maxTAT, wait, err = h.charge(now)
			if err != nil {
				return driver.Result{}, err
			}
			if wait > 0 {
				if h.mine != nil {
					if err := h.undo(); err != nil {
						return driver.Result{}, err
					}
				}
				return driver.Result{Outcome: driver.RateLimited, RetryAfter: gcra.RetryAfter(wait)}, nil
			}
		}

		// 3. The claim as it stands: a duplicate or a pending one
		// spends nothing.
		if d.Verdict != claim.Free {
			return d.Result(), nil
		}

		// 4. Take the claim (add, or cas over an expired one).
		if h.ck != "" && h.mine == nil {
			exp := now + h.claim.PendingTTL.Microseconds()
			val := encodeClaim(claim.State{Phase: claim.Pending, HookID: h.claim.HookID, Node: h.claim.Node, Expires: exp})
			err := h.write(&memcache.Item{Key: h.ck, Value: val, Expiration: expiration(now, exp)}, h.citem)
			switch {
			case err == nil:
				h.mine = val
			case conflict(err):
				if err := h.read(h.bk, h.ck); err != nil {
					return driver.Result{}, err
				}
				continue
			default:
				return driver.Result{}, classify(h.ctx, "hit: claim", err)
			}
		}

		// 5. Charge the buckets (add, or cas over what step 2 read).
		if h.bk != "" {
			val := encodeBucket(tats, now)
			err := h.write(&memcache.Item{Key: h.bk, Value: val, Expiration: expiration(now, maxTAT)}, h.bucket)
			switch {
			case err == nil:
			case conflict(err):
				// The claim stays ours; read the bucket alone and
				// decide again.
				if err := h.read(h.bk, ""); err != nil {
					return driver.Result{}, err
				}
				continue
			default:
				return driver.Result{}, classify(h.ctx, "hit: charge", err)
			}
		}
		return driver.Result{Outcome: driver.OK}, nil
	}
}

// charge applies every charge to the bucket item as read, at now. It
// returns the TATs to store and the largest, or the longest wait (µs) of
// the charges that do not conform.
func (h *hit) charge(now int64) (tats []kindTAT, maxTAT, wait int64, err error) {
	if h.bucket != nil {
		tats, err = parseBucket(h.bucket.Value)
		if err != nil {
			return nil, 0, 0, malformed(h.bk, err)
		}
	}
	for _, ch := range h.charges {
		i := 0
		for i < len(tats) && tats[i].kind != string(ch.Kind) {
			i++
		}
		if i == len(tats) {
			tats = append(tats, kindTAT{kind: string(ch.Kind)})
		}
		d := gcra.Charge(now, tats[i].tat, ch.Increment.Microseconds(), ch.Capacity.Microseconds())
		if !d.Conform {
			wait = max(wait, d.Wait)
			continue
		}
		tats[i].tat = d.TAT
	}
	for _, kt := range tats {
		maxTAT = max(maxTAT, kt.tat)
	}
	return tats, maxTAT, wait, nil
}

// read reads the items named (one round trip: a tenant's items share a
// server); an empty key is not read.
func (h *hit) read(bk, ck string) error {
	err := readAgain(h.ctx, func() error {
		switch {
		case bk != "" && ck != "":
			items, err := h.s.mc.GetMulti([]string{bk, ck})
			if err != nil {
				return err
			}
			h.bucket, h.citem = items[bk], items[ck]
		case bk != "":
			it, err := h.s.mc.Get(bk)
			if err != nil && err != memcache.ErrCacheMiss {
				return err
			}
			h.bucket = it
		case ck != "":
			it, err := h.s.mc.Get(ck)
			if err != nil && err != memcache.ErrCacheMiss {
				return err
			}
			h.citem = it
		}
		return nil
	})
	if err != nil {
		return classify(h.ctx, "hit: read", err)
	}
	return nil
}

// write stores it over prev as read: cas when prev is an item, add when it
// was absent.
func (h *hit) write(it *memcache.Item, prev *memcache.Item) error {
	if prev == nil {
		return h.s.mc.Add(it)
	}
	it.CasID = prev.CasID
	return h.s.mc.CompareAndSwap(it)
}

// undo gives back the pending claim this call took: a cas of the very item
// written, expiring at once. Anything else there (it expired and another
// hook took it) is left alone.
func (h *hit) undo() error {
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			if err := h.backoff(attempt); err != nil {
				return err
			}
		}
		it, err := h.s.mc.Get(h.ck)
		if err == memcache.ErrCacheMiss {
			break
		}
		if err != nil {
			return classify(h.ctx, "hit: undo claim", err)
		}
		if !bytes.Equal(it.Value, h.mine) {
			break
		}
		it.Value, it.Expiration = nil, -1
		err = h.s.mc.CompareAndSwap(it)
		if err == nil || err == memcache.ErrCacheMiss || err == memcache.ErrNotStored {
			break
		}
		if err != memcache.ErrCASConflict {
			return classify(h.ctx, "hit: undo claim", err)
		}
	}
	h.mine = nil
	h.c.log.Debug("memcached: claim given back after a bucket conflict turned into a denial")
	return nil
}

func (h *hit) backoff(attempt int) error {
	return backoff(h.ctx, "hit", attempt)
}

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

// Commit implements driver.Conn (C5–C8).
func (c *conn) Commit(ctx context.Context, claims []driver.Claim) []error {
	return c.settle(ctx, claim.Commit, claims)
}

// Release implements driver.Conn (C5–C8).
func (c *conn) Release(ctx context.Context, claims []driver.Claim) []error {
	return c.settle(ctx, claim.Release, claims)
}

// settle reads every claim at once (one round trip per server), then
// settles them one by one under CAS.
func (c *conn) settle(ctx context.Context, op claim.Op, claims []driver.Claim) []error {
	errs := make([]error, len(claims))
	s, done, err := c.begin(ctx)
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
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
	if err != nil {
		if ctx.Err() != nil {
			err = classify(ctx, op.String(), err)
			for i := range errs {
				errs[i] = err
			}
			return errs
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
		if ctx.Err() != nil && errs[i] != nil && !isOutcome(errs[i]) {
			for j := i + 1; j < len(errs); j++ {
				errs[j] = errs[i]
			}
			break
		}
	}
	return errs
}

func isOutcome(err error) bool {
	_, lost := err.(*driver.ClaimLostError)
	return lost || err == driver.ErrAlreadyCommitted
}

// settleOne settles one claim whose item was read as it (nil: absent) when
// read is true; otherwise it reads it first.
func (c *conn) settleOne(ctx context.Context, s *session, op claim.Op, cl *driver.Claim, key string, it *memcache.Item, read bool) error {
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
			val := encodeClaim(claim.State{Phase: claim.Committed, HookID: cl.HookID, Node: cl.Node, Expires: st.Expires})
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

// Close implements driver.Conn: every idle socket is closed and every
// caller waiting for a session returns ErrClosed; a session in use (there
// is none when the Store calls Close) closes on release.
func (c *conn) Close() error {
	c.pool.close()
	return nil
}
