package memcached

import (
	"bytes"
	"context"
	"errors"
	"time"

	"github.com/bradfitz/gomemcache/memcache"

	"github.com/fleetstore/fleetstore/claim"
	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/gcra"
)

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

	// The reset-after of each charge (G10), µs, as charge last computed
	// them: held as the bucket stands, taken once charged.
	held, taken [driver.MaxCharges]int64
}

// result is r with the reset-after of every charge: leads (held or taken).
func (h *hit) result(r driver.Result, leads *[driver.MaxCharges]int64) driver.Result {
	r.NBuckets = len(h.charges)
	for i := range h.charges {
		r.Buckets[i].ResetAfter = time.Duration(leads[i]) * time.Microsecond
	}
	return r
}

// run decides the Hit: it reads the bucket and claim items once, then
// decides and writes under CAS. A write that meets a conflict reads again,
// and the Hit is decided again after a backoff, until a write holds or the
// deadline passes.
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
		res, err := h.decide(h.c.now())
		if err != errAgain {
			return res, err
		}
	}
}

// errAgain is what take and store return after a conflict, once they have
// read the items again: the Hit is decided again. It never leaves run.
var errAgain = errors.New("memcached: conflict: decide again")

// decide decides the Hit at now (µs) on the items as last read, and
// writes what it takes. It returns errAgain after a write conflict.
func (h *hit) decide(now int64) (driver.Result, error) {
	// 1. Our own pending claim: a retry of a hit whose reply was lost.
	d, err := h.verdict(now)
	if err != nil {
		return driver.Result{}, err
	}
	if d.Verdict == claim.OwnRetry {
		// Charged nothing: the buckets as they stand (G10).
		if h.bk != "" {
			if _, _, _, err := h.charge(now); err != nil {
				return driver.Result{}, err
			}
		}
		return h.result(d.Result(), &h.held), nil
	}

	// 2. The charges: a denial writes nothing (and gives back the
	// claim this call took, if it took one before a bucket conflict).
	var tats []kindTAT
	var maxTAT int64
	if h.bk != "" {
		var wait int64
		tats, maxTAT, wait, err = h.charge(now)
		if err != nil {
			return driver.Result{}, err
		}
		if wait > 0 {
			return h.deny(wait)
		}
	}

	// 3. The claim as it stands: a duplicate or a pending one
	// spends nothing.
	if d.Verdict != claim.Free {
		return h.result(d.Result(), &h.held), nil
	}

	// 4. Take the claim.
	if h.ck != "" && h.mine == nil {
		if err := h.take(now); err != nil {
			return driver.Result{}, err
		}
	}

	// 5. Charge the buckets.
	if h.bk != "" {
		if err := h.store(now, tats, maxTAT); err != nil {
			return driver.Result{}, err
		}
	}
	return h.result(driver.Result{Outcome: driver.OK}, &h.taken), nil
}

// verdict is claim.Hit's on the claim item as last read. It is Free when
// the Hit has no claim, the item is absent, or this call holds the claim
// already (it took it before a bucket conflict).
func (h *hit) verdict(now int64) (claim.Decision, error) {
	if h.ck == "" || h.mine != nil || h.citem == nil {
		return claim.Decision{Verdict: claim.Free}, nil
	}
	held, err := parseClaim(h.citem.Value)
	if err != nil {
		return claim.Decision{}, malformed(h.ck, err)
	}
	return claim.Hit(held, now, h.claim.HookID), nil
}

// deny gives back the claim this call took, if it holds one, and returns
// RateLimited with the longest wait (µs) of the charges that do not
// conform.
func (h *hit) deny(wait int64) (driver.Result, error) {
	if h.mine != nil {
		if err := h.undo(); err != nil {
			return driver.Result{}, err
		}
	}
	res := driver.Result{Outcome: driver.RateLimited, RetryAfter: gcra.RetryAfter(wait)}
	return h.result(res, &h.held), nil
}

// take writes the pending claim at now (µs): add, or cas over the expired
// one read. After a conflict it reads both items again and returns
// errAgain.
func (h *hit) take(now int64) error {
	exp := now + h.claim.PendingTTL.Microseconds()
	val := encodeClaim(claim.State{
		Phase: claim.Pending, HookID: h.claim.HookID, Node: h.claim.Node, Expires: exp,
	})
	err := h.write(&memcache.Item{Key: h.ck, Value: val, Expiration: expiration(now, exp)}, h.citem)
	switch {
	case err == nil:
		h.mine = val
		return nil
	case conflict(err):
		if err := h.read(h.bk, h.ck); err != nil {
			return err
		}
		return errAgain
	default:
		return classify(h.ctx, "hit: claim", err)
	}
}

// store writes the charged TATs at now (µs), expiring with the largest
// one: add, or cas over the bucket item read. After a conflict it reads
// the bucket alone again (the claim stays this call's) and returns
// errAgain.
func (h *hit) store(now int64, tats []kindTAT, maxTAT int64) error {
	item := &memcache.Item{Key: h.bk, Value: encodeBucket(tats, now), Expiration: expiration(now, maxTAT)}
	err := h.write(item, h.bucket)
	switch {
	case err == nil:
		return nil
	case conflict(err):
		if err := h.read(h.bk, ""); err != nil {
			return err
		}
		return errAgain
	default:
		return classify(h.ctx, "hit: charge", err)
	}
}

// charge applies every charge to the bucket item as read, at now. It
// returns the TATs to store and the largest, or the longest wait (µs) of
// the charges that do not conform, and sets each charge's reset-after
// (h.held, h.taken).
func (h *hit) charge(now int64) (tats []kindTAT, maxTAT, wait int64, err error) {
	if h.bucket != nil {
		tats, err = parseBucket(h.bucket.Value)
		if err != nil {
			return nil, 0, 0, malformed(h.bk, err)
		}
	}
	for j, ch := range h.charges {
		i := 0
		for i < len(tats) && tats[i].kind != string(ch.Kind) {
			i++
		}
		if i == len(tats) {
			tats = append(tats, kindTAT{kind: string(ch.Kind)})
		}
		h.held[j] = gcra.ResetAfter(now, tats[i].tat)
		h.taken[j] = h.held[j]
		d := gcra.Charge(now, tats[i].tat, ch.Increment.Microseconds(), ch.Capacity.Microseconds())
		if !d.Conform {
			wait = max(wait, d.Wait)
			continue
		}
		tats[i].tat = d.TAT
		h.taken[j] = gcra.ResetAfter(now, d.TAT)
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
