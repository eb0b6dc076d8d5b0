package memstore

import (
	"context"

	"github.com/fleetstore/fleetstore/claim"
	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/gcra"
)

type conn struct {
	st      *state
	release func() // forgets a named state with its last Store; nil for memory://
}

var (
	_ driver.Conn        = (*conn)(nil)
	_ driver.NonBlocking = (*conn)(nil)
	_ driver.Peeker      = (*conn)(nil)
)

func (*conn) NonBlocking() {}

// Hit implements CONTRACT §3–§4 under one shard lock, in the order of
// package claim: own pending claim first (a retried hit charges nothing),
// then the charges (a denial writes nothing), then the claim, then every
// write. Every outcome reports each charged bucket's reset-after (G10):
// the new TAT's lead when the charges were taken, the stored one's when
// nothing was. A window charge (§3.2) counts in its window holding the
// store's now, and reports the count and the time to the window's end.
func (c *conn) Hit(_ context.Context, charges []driver.Charge,
	cl *driver.Claim) (res driver.Result, err error) {
	tenant := ""
	if len(charges) > 0 {
		tenant = charges[0].Tenant
	} else {
		tenant = cl.Tenant
	}
	sh := c.st.shard(tenant)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now := c.st.now()

	// The buckets and windows as they stand: what every outcome but a
	// charged OK reports. A window charge counts in the window holding
	// now; one whose windows do not hold it decides nothing.
	b := sh.buckets[tenant]
	w := sh.windows[tenant]
	var held [driver.MaxCharges]int64         // the stored TATs (0: absent), or counts
	var starts, ends [driver.MaxCharges]int64 // the windows holding now
	gcraCharges := 0
	res.NBuckets = len(charges)
	for i := range charges {
		ch := &charges[i]
		if ch.IsWindow() {
			if starts[i], ends[i], err = window(ch, now); err != nil {
				return driver.Result{}, err
			}
			held[i] = w.used(string(ch.Kind), starts[i], now)
			res.Buckets[i].Used, res.Buckets[i].ResetAfter = held[i], micros(ends[i]-now)
			continue
		}
		gcraCharges++
		held[i] = b.tat(string(ch.Kind), now)
		res.Buckets[i].ResetAfter = micros(gcra.ResetAfter(now, held[i]))
	}

	var d claim.Decision
	var id claimID
	if cl != nil {
		id = claimID{cl.Tenant, cl.SourceID, cl.Key}
		d = claim.Hit(sh.claims[id], now, cl.HookID)
		if d.Verdict == claim.OwnRetry {
			d.Answer(&res)
			return res, nil
		}
	}

	var tats [driver.MaxCharges]int64
	var wait int64
	for i, ch := range charges {
		if ch.IsWindow() {
			if held[i] > ch.Window.Max-ch.Window.Cost {
				wait = max(wait, ends[i]-now)
			}
			continue
		}
		g := gcra.Charge(now, held[i], ch.Increment.Microseconds(), ch.Capacity.Microseconds())
		if !g.Conform {
			wait = max(wait, g.Wait)
		}
		tats[i] = g.TAT
	}
	if wait > 0 {
		res.Outcome, res.RetryAfter = driver.RateLimited, gcra.RetryAfter(wait)
		return res, nil
	}
	if d.Verdict != claim.Free {
		d.Answer(&res)
		return res, nil
	}

	if gcraCharges > 0 {
		if b == nil || b.expires <= now {
			if b == nil {
				b = &tenantBuckets{}
				sh.buckets[tenant] = b
			}
			b.tats, b.expires = b.tats[:0], 0
		}
	}
	if gcraCharges < len(charges) && w == nil {
		w = &tenantWindows{}
		sh.windows[tenant] = w
	}
	for i := range charges {
		ch := &charges[i]
		if ch.IsWindow() {
			used := held[i] + ch.Window.Cost
			w.set(string(ch.Kind), starts[i], ends[i], used, now)
			res.Buckets[i].Used = used
			continue
		}
		b.set(string(ch.Kind), tats[i])
		res.Buckets[i].ResetAfter = micros(gcra.ResetAfter(now, tats[i]))
	}
	if cl != nil {
		sh.claims[id] = claim.State{Phase: claim.Pending, HookID: cl.HookID, Node: cl.Node,
			Expires: now + cl.PendingTTL.Microseconds()}
	}
	sh.wrote(now)
	res.Outcome = driver.OK
	return res, nil
}

// Peek implements driver.Peeker (G11): the reset-after of charges'
// buckets as they stand, and the counts of their windows, under the shard
// lock, writing nothing.
func (c *conn) Peek(_ context.Context, charges []driver.Charge) (res driver.Result, err error) {
	if err := c.st.quota(charges, &res); err != nil {
		return driver.Result{}, err
	}
	return res, nil
}

// Commit implements the settle table of CONTRACT §4 (C5–C8).
func (c *conn) Commit(_ context.Context, claims []driver.Claim) ([]error, error) {
	errs := make([]error, len(claims))
	for i := range claims {
		errs[i] = c.settle(&claims[i], claim.Commit)
	}
	return errs, nil
}

// Release implements the settle table of CONTRACT §4 (C5–C8).
func (c *conn) Release(_ context.Context, claims []driver.Claim) ([]error, error) {
	errs := make([]error, len(claims))
	for i := range claims {
		errs[i] = c.settle(&claims[i], claim.Release)
	}
	return errs, nil
}

// settle settles one claim by the settle table of package claim.
func (c *conn) settle(cl *driver.Claim, op claim.Op) error {
	sh := c.st.shard(cl.Tenant)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now := c.st.now()
	id := claimID{cl.Tenant, cl.SourceID, cl.Key}
	s := claim.Settle(sh.claims[id], now, op, cl.HookID, cl.TTL.Microseconds())
	switch s.Write {
	case claim.Store:
		sh.claims[id] = claim.State{Phase: claim.Committed, HookID: cl.HookID, Node: cl.Node,
			Expires: s.Expires}
		sh.wrote(now)
	case claim.Delete:
		delete(sh.claims, id)
	}
	return s.Err
}

// Reset implements G5: one delete of the tenant's bucket record, one of
// its window counts.
func (c *conn) Reset(_ context.Context, tenant string) error {
	sh := c.st.shard(tenant)
	sh.mu.Lock()
	delete(sh.buckets, tenant)
	delete(sh.windows, tenant)
	sh.mu.Unlock()
	return nil
}

func (*conn) Ping(context.Context) error { return nil }

// Close implements driver.Conn. A named state outlives the Conn while other
// Stores of the same NAME are open, and is forgotten with the last.
func (c *conn) Close() error {
	if c.release != nil {
		c.release()
	}
	return nil
}
