package memory

import (
	"context"

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
)

func (*conn) NonBlocking() {}

// Hit implements CONTRACT §3–§4 under one shard lock: own pending claim
// first (a retried hit charges nothing), then the charges (a denial writes
// nothing), then the claim, then every write.
func (c *conn) Hit(_ context.Context, charges []driver.Charge, claim *driver.Claim) (driver.Result, error) {
	tenant := ""
	if len(charges) > 0 {
		tenant = charges[0].Tenant
	} else {
		tenant = claim.Tenant
	}
	sh := c.st.shard(tenant)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now := c.st.now()

	var held claimRecord
	var id claimID
	live := false
	if claim != nil {
		id = claimID{claim.Tenant, claim.SourceID, claim.Key}
		held, live = sh.claims[id]
		live = live && held.expires > now
		if live && !held.committed && held.hookID == claim.HookID {
			return driver.Result{Outcome: driver.OK}, nil
		}
	}

	b := sh.buckets[tenant]
	var buf [8]int64
	tats := buf[:0]
	var wait int64
	for _, ch := range charges {
		d := gcra.Charge(now, b.tat(string(ch.Kind), now), ch.Increment.Microseconds(), ch.Capacity.Microseconds())
		if !d.Conform {
			wait = max(wait, d.Wait)
		}
		tats = append(tats, d.TAT)
	}
	if wait > 0 {
		return driver.Result{Outcome: driver.RateLimited, RetryAfter: gcra.RetryAfter(wait)}, nil
	}

	if live {
		if held.committed {
			return driver.Result{Outcome: driver.Duplicate, HookID: held.hookID}, nil
		}
		return driver.Result{Outcome: driver.Pending, RetryAfter: gcra.RetryAfter(held.expires - now)}, nil
	}

	if len(charges) > 0 {
		if b == nil || b.expires <= now {
			if b == nil {
				b = &tenantBuckets{}
				sh.buckets[tenant] = b
			}
			b.tats, b.expires = b.tats[:0], 0
		}
		for i, ch := range charges {
			b.set(string(ch.Kind), tats[i])
		}
	}
	if claim != nil {
		sh.claims[id] = claimRecord{hookID: claim.HookID, node: claim.Node, expires: now + claim.PendingTTL.Microseconds()}
	}
	sh.wrote(now)
	return driver.Result{Outcome: driver.OK}, nil
}

// Commit implements the settle table of CONTRACT §4 (C5–C8).
func (c *conn) Commit(_ context.Context, claims []driver.Claim) []error {
	errs := make([]error, len(claims))
	for i := range claims {
		errs[i] = c.settle(&claims[i], true)
	}
	return errs
}

// Release implements the settle table of CONTRACT §4 (C5–C8).
func (c *conn) Release(_ context.Context, claims []driver.Claim) []error {
	errs := make([]error, len(claims))
	for i := range claims {
		errs[i] = c.settle(&claims[i], false)
	}
	return errs
}

func (c *conn) settle(cl *driver.Claim, commit bool) error {
	sh := c.st.shard(cl.Tenant)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now := c.st.now()
	id := claimID{cl.Tenant, cl.SourceID, cl.Key}
	held, live := sh.claims[id]
	live = live && held.expires > now
	switch {
	case live && held.hookID != cl.HookID:
		return &driver.ClaimLostError{Holder: held.hookID}
	case commit && live && held.committed:
		return nil
	case commit:
		sh.claims[id] = claimRecord{hookID: cl.HookID, node: cl.Node, committed: true, expires: now + cl.TTL.Microseconds()}
		sh.wrote(now)
	case live && held.committed:
		return driver.ErrAlreadyCommitted
	case live:
		delete(sh.claims, id)
	}
	return nil
}

// Reset implements G5: one delete of the tenant's bucket record.
func (c *conn) Reset(_ context.Context, tenant string) error {
	sh := c.st.shard(tenant)
	sh.mu.Lock()
	delete(sh.buckets, tenant)
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
