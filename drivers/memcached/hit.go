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

	// The state of each charge (G10) as charge last computed it: held as
	// the bucket item stands, taken once charged.
	held, taken [driver.MaxCharges]chargeState
}

// chargeState is what a Hit reports of one charge: the reset-after (µs)
// and, for a window charge, the units used in its window.
type chargeState struct{ lead, used int64 }

// result is r with the state of every charge: states (held or taken).
func (h *hit) result(r driver.Result, states *[driver.MaxCharges]chargeState) driver.Result {
	r.NBuckets = len(h.charges)
	for i := range h.charges {
		r.Buckets[i].ResetAfter = time.Duration(states[i].lead) * time.Microsecond
		r.Buckets[i].Used = states[i].used
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
			if _, _, err := h.charge(now); err != nil {
				return driver.Result{}, err
			}
		}
		return h.result(d.Result(), &h.held), nil
	}

	// 2. The charges, GCRA and window: a denial of any writes nothing
	// (and gives back the claim this call took, if it took one before a
	// bucket conflict).
	var next bucketState
	if h.bk != "" {
		var wait int64
		next, wait, err = h.charge(now)
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
		if err := h.store(now, next); err != nil {
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

// store writes the charged bucket item at now (µs), expiring with its
// largest TAT or window end: add, or cas over the bucket item read. After
// a conflict it reads the bucket alone again (the claim stays this
// call's) and returns errAgain.
func (h *hit) store(now int64, next bucketState) error {
	item := &memcache.Item{Key: h.bk, Value: encodeBucket(next, now), Expiration: expiration(now, next.until())}
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

// charge applies every charge to the bucket item as read, at now: a GCRA
// charge to its kind's TAT, a window charge to its kind's count in the
// window that holds now (CONTRACT §3.2). It returns the item's content
// with every charge taken, or the longest wait (µs) of the charges that
// do not conform, and sets each charge's state (h.held, h.taken). A
// window charge none of whose windows holds now is errOutside.
func (h *hit) charge(now int64) (next bucketState, wait int64, err error) {
	if h.bucket != nil {
		next, err = parseBucket(h.bucket.Value)
		if err != nil {
			return bucketState{}, 0, malformed(h.bk, err)
		}
	}
	for j := range h.charges {
		ch := &h.charges[j]
		if ch.IsWindow() {
			start, end, ok := windowAt(&ch.Window, now)
			if !ok {
				return bucketState{}, 0, errOutside
			}
			i, ok := next.window(string(ch.Kind), start, now)
			if !ok {
				i = len(next.wins)
				next.wins = append(next.wins, kindWindow{kind: string(ch.Kind), start: start, end: end})
			}
			w := &next.wins[i]
			// Windows of one kind that start together count the same
			// units (a plan that changed the kind's period): the count
			// lasts to the end of the one charged, when it is written.
			w.end = end
			h.held[j] = chargeState{lead: end - now, used: w.used}
			h.taken[j] = h.held[j]
			if w.used+ch.Window.Cost > ch.Window.Max {
				wait = max(wait, end-now)
				continue
			}
			w.used += ch.Window.Cost
			h.taken[j].used = w.used
			continue
		}
		i := 0
		for i < len(next.tats) && next.tats[i].kind != string(ch.Kind) {
			i++
		}
		if i == len(next.tats) {
			next.tats = append(next.tats, kindTAT{kind: string(ch.Kind)})
		}
		kt := &next.tats[i]
		h.held[j] = chargeState{lead: gcra.ResetAfter(now, kt.tat)}
		h.taken[j] = h.held[j]
		d := gcra.Charge(now, kt.tat, ch.Increment.Microseconds(), ch.Capacity.Microseconds())
		if !d.Conform {
			wait = max(wait, d.Wait)
			continue
		}
		kt.tat = d.TAT
		h.taken[j].lead = gcra.ResetAfter(now, d.TAT)
	}
	return next, wait, nil
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
