package conformance_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore/calendar"
	"github.com/fleetstore/fleetstore/conformance"
	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/drivers/memory"
	"github.com/fleetstore/fleetstore/gcra"
)

// The suite proves its own teeth: each broken variant of the memory driver
// below breaks one clause, and the suite must fail that clause.

// broken wraps a memory conn; each field, when set, replaces one method.
type broken struct {
	driver.Conn
	now     func() time.Time // the store's clock
	hit     func(c driver.Conn, ctx context.Context, charges []driver.Charge, claim *driver.Claim) (driver.Result, error)
	commit  func(c driver.Conn, ctx context.Context, claims []driver.Claim) ([]error, error)
	release func(c driver.Conn, ctx context.Context, claims []driver.Claim) ([]error, error)
	reset   func(c driver.Conn, ctx context.Context, tenant string) error
	peek    func(c driver.Conn, ctx context.Context, charges []driver.Charge) (driver.Result, error)
}

// Peek implements driver.Peeker, as the memory conn it wraps does.
func (b *broken) Peek(ctx context.Context, charges []driver.Charge) (driver.Result, error) {
	if b.peek != nil {
		return b.peek(b.Conn, ctx, charges)
	}
	return b.Conn.(driver.Peeker).Peek(ctx, charges)
}

// peekThen is a broken Peek: the memory conn's answer, then also does.
func peekThen(also func(c driver.Conn, ctx context.Context, charges []driver.Charge)) func(driver.Conn, context.Context, []driver.Charge) (driver.Result, error) {
	return func(c driver.Conn, ctx context.Context, charges []driver.Charge) (driver.Result, error) {
		res, err := c.(driver.Peeker).Peek(ctx, charges)
		also(c, ctx, charges)
		return res, err
	}
}

// peekOf is a broken Peek that reads the buckets of tenant(t) instead of t's.
func peekOf(tenant func(string) string) func(driver.Conn, context.Context, []driver.Charge) (driver.Result, error) {
	return func(c driver.Conn, ctx context.Context, charges []driver.Charge) (driver.Result, error) {
		moved := slices.Clone(charges)
		for i := range moved {
			moved[i].Tenant = tenant(moved[i].Tenant)
		}
		return c.(driver.Peeker).Peek(ctx, moved)
	}
}

func (b *broken) Hit(ctx context.Context, charges []driver.Charge, claim *driver.Claim) (driver.Result, error) {
	if b.hit != nil {
		return b.hit(b.Conn, ctx, charges, claim)
	}
	return b.Conn.Hit(ctx, charges, claim)
}

func (b *broken) Commit(ctx context.Context, claims []driver.Claim) ([]error, error) {
	if b.commit != nil {
		return b.commit(b.Conn, ctx, claims)
	}
	return b.Conn.Commit(ctx, claims)
}

func (b *broken) Release(ctx context.Context, claims []driver.Claim) ([]error, error) {
	if b.release != nil {
		return b.release(b.Conn, ctx, claims)
	}
	return b.Conn.Release(ctx, claims)
}

func (b *broken) Reset(ctx context.Context, tenant string) error {
	if b.reset != nil {
		return b.reset(b.Conn, ctx, tenant)
	}
	return b.Conn.Reset(ctx, tenant)
}

// brokenDriver opens memory conns wrapped by wrap, on clock when it is
// not nil (else on the wall clock).
type brokenDriver struct {
	inner *memory.Driver
	clock *manualClock
	wrap  func(*broken)
}

func newBrokenDriver(clock *manualClock, wrap func(*broken)) *brokenDriver {
	if clock == nil {
		return &brokenDriver{inner: memory.New(nil), wrap: wrap}
	}
	return &brokenDriver{inner: memory.New(clock.micros), clock: clock, wrap: wrap}
}

func (d *brokenDriver) Open(cfg driver.Config) (driver.Conn, error) {
	c, err := d.inner.Open(cfg)
	if err != nil {
		return nil, err
	}
	b := &broken{Conn: c, now: time.Now}
	if d.clock != nil {
		b.now = d.clock.Now
	}
	d.wrap(b)
	return b, nil
}

// stallDriver never answers: honest returns at its context's deadline,
// the broken one well after it; with latePeek, its Peek alone is late.
type stallDriver struct{ honest, latePeek bool }

func (d stallDriver) Open(driver.Config) (driver.Conn, error) { return stallConn(d), nil }

type stallConn struct{ honest, latePeek bool }

func (s stallConn) Peek(ctx context.Context, _ []driver.Charge) (driver.Result, error) {
	if s.latePeek {
		s.honest = false
	}
	return driver.Result{}, s.wait(ctx)
}

func (s stallConn) wait(ctx context.Context) error {
	<-ctx.Done()
	if s.honest {
		return ctx.Err()
	}
	// 150ms late: past T1's 10ms and its scheduling slack, whatever the
	// machine's load.
	time.Sleep(150 * time.Millisecond)
	return errors.New("late")
}

func (s stallConn) Hit(ctx context.Context, _ []driver.Charge, _ *driver.Claim) (driver.Result, error) {
	return driver.Result{}, s.wait(ctx)
}

func (s stallConn) Commit(ctx context.Context, claims []driver.Claim) ([]error, error) {
	return nil, s.wait(ctx)
}

func (s stallConn) Release(ctx context.Context, claims []driver.Claim) ([]error, error) {
	return s.Commit(ctx, claims)
}

func (s stallConn) Reset(ctx context.Context, _ string) error { return s.wait(ctx) }
func (s stallConn) Ping(ctx context.Context) error            { return s.wait(ctx) }
func (stallConn) Close() error                                { return nil }

// holder returns the hook holding a claim, from the ClaimLostError.
func holder(err error) (string, bool) {
	var lost *driver.ClaimLostError
	if errors.As(err, &lost) {
		return lost.Holder, true
	}
	return "", false
}

var variants = []struct {
	name   string
	breaks string // the clause it must fail
	wrap   func(*broken)
}{
	{"charges-on-duplicate", "C4", func(b *broken) {
		b.hit = func(c driver.Conn, ctx context.Context, charges []driver.Charge, claim *driver.Claim) (driver.Result, error) {
			res, err := c.Hit(ctx, charges, claim)
			if err == nil && (res.Outcome == driver.Duplicate || res.Outcome == driver.Pending) && len(charges) > 0 {
				_, _ = c.Hit(ctx, charges, nil)
			}
			return res, err
		}
	}},
	{"writes-on-denial", "G3", func(b *broken) {
		b.hit = func(c driver.Conn, ctx context.Context, charges []driver.Charge, claim *driver.Claim) (driver.Result, error) {
			res, err := c.Hit(ctx, charges, claim)
			if err == nil && res.Outcome == driver.RateLimited {
				for _, ch := range charges {
					_, _ = c.Hit(ctx, []driver.Charge{ch}, nil)
				}
			}
			return res, err
		}
	}},
	{"admits-burst-plus-one", "G1", func(b *broken) {
		b.hit = func(c driver.Conn, ctx context.Context, charges []driver.Charge, claim *driver.Claim) (driver.Result, error) {
			more := make([]driver.Charge, len(charges))
			for i, ch := range charges {
				ch.Capacity += ch.Increment
				more[i] = ch
			}
			return c.Hit(ctx, more, claim)
		}
	}},
	{"rounds-retry-after-down", "G2", func(b *broken) {
		b.hit = func(c driver.Conn, ctx context.Context, charges []driver.Charge, claim *driver.Claim) (driver.Result, error) {
			res, err := c.Hit(ctx, charges, claim)
			if res.RetryAfter > time.Millisecond {
				res.RetryAfter -= time.Millisecond // ceil - 1ms: the floor of a fractional wait
			}
			return res, err
		}
	}},
	{"rounds-state-down-slowly", "G2", func(b *broken) {
		// A store whose Hits take 0.7ms (too slow for G2's tight check)
		// and whose bucket state is whole ms, rounded down, with a
		// retry-after true to that state.
		b.hit = func(c driver.Conn, ctx context.Context, charges []driver.Charge, claim *driver.Claim) (driver.Result, error) {
			time.Sleep(700 * time.Microsecond)
			res, err := c.Hit(ctx, charges, claim)
			for i := range res.NBuckets {
				res.Buckets[i].ResetAfter = res.Buckets[i].ResetAfter.Truncate(time.Millisecond)
			}
			if res.Outcome == driver.RateLimited && res.NBuckets == 1 {
				wait := res.Buckets[0].ResetAfter + charges[0].Increment - charges[0].Capacity
				res.RetryAfter = max(wait.Round(time.Millisecond), time.Millisecond)
			}
			return res, err
		}
	}},
	{"release-ignores-hook-id", "C8", func(b *broken) {
		b.release = func(c driver.Conn, ctx context.Context, claims []driver.Claim) ([]error, error) {
			errs, err := c.Release(ctx, claims)
			for i, err := range errs {
				if h, ok := holder(err); ok {
					cl := claims[i]
					cl.HookID = h
					errs[i] = one(c.Release(ctx, []driver.Claim{cl}))
				}
			}
			return errs, err
		}
	}},
	{"commit-ignores-hook-id", "C8", func(b *broken) {
		b.commit = func(c driver.Conn, ctx context.Context, claims []driver.Claim) ([]error, error) {
			errs, err := c.Commit(ctx, claims)
			for i, err := range errs {
				if h, ok := holder(err); ok {
					cl := claims[i]
					cl.HookID = h
					_, _ = c.Release(ctx, []driver.Claim{cl})
					errs[i] = one(c.Commit(ctx, []driver.Claim{claims[i]}))
				}
			}
			return errs, err
		}
	}},
	{"claim-lost-unnamed-when-committed", "C8", func(b *broken) {
		unnamed := func(settle func(driver.Conn, context.Context, []driver.Claim) ([]error, error)) func(driver.Conn, context.Context, []driver.Claim) ([]error, error) {
			return func(c driver.Conn, ctx context.Context, claims []driver.Claim) ([]error, error) {
				errs, err := settle(c, ctx, claims)
				for i, err := range errs {
					if _, ok := holder(err); ok {
						// Held by another hook: a Hit writes nothing and says
						// whether the holder committed it.
						if res, _ := c.Hit(ctx, nil, &claims[i]); res.Outcome == driver.Duplicate {
							errs[i] = &driver.ClaimLostError{}
						}
					}
				}
				return errs, err
			}
		}
		b.commit = unnamed(driver.Conn.Commit)
		b.release = unnamed(driver.Conn.Release)
	}},
	{"commit-of-absent-never-expires", "C9", func(b *broken) {
		var hit sync.Map // identities of the claims a Hit has seen
		b.hit = func(c driver.Conn, ctx context.Context, charges []driver.Charge, claim *driver.Claim) (driver.Result, error) {
			if claim != nil {
				hit.Store(claimID(claim), true)
			}
			return c.Hit(ctx, charges, claim)
		}
		b.commit = func(c driver.Conn, ctx context.Context, claims []driver.Claim) ([]error, error) {
			kept := slices.Clone(claims)
			for i := range kept {
				if _, ok := hit.Load(claimID(&kept[i])); !ok {
					kept[i].TTL = 366 * 24 * time.Hour
				}
			}
			return c.Commit(ctx, kept)
		}
	}},
	{"pending-claim-never-expires", "C9", func(b *broken) {
		b.hit = func(c driver.Conn, ctx context.Context, charges []driver.Charge, claim *driver.Claim) (driver.Result, error) {
			if claim != nil {
				forever := *claim
				forever.PendingTTL = 366 * 24 * time.Hour
				claim = &forever
			}
			return c.Hit(ctx, charges, claim)
		}
	}},
	{"buckets-ignore-tenant", "G5", func(b *broken) {
		b.hit = func(c driver.Conn, ctx context.Context, charges []driver.Charge, claim *driver.Claim) (driver.Result, error) {
			shared := slices.Clone(charges)
			for i := range shared {
				shared[i].Tenant = "shared"
			}
			return c.Hit(ctx, shared, claim)
		}
	}},
	{"release-of-committed-is-nil", "C6", func(b *broken) {
		b.release = func(c driver.Conn, ctx context.Context, claims []driver.Claim) ([]error, error) {
			errs, err := c.Release(ctx, claims)
			for i, err := range errs {
				if errors.Is(err, driver.ErrAlreadyCommitted) {
					errs[i] = nil
				}
			}
			return errs, err
		}
	}},
	{"reset-forgets-nothing", "G5", func(b *broken) {
		b.reset = func(driver.Conn, context.Context, string) error { return nil }
	}},
	{"charges-own-retry", "C2", func(b *broken) {
		b.hit = func(c driver.Conn, ctx context.Context, charges []driver.Charge, claim *driver.Claim) (driver.Result, error) {
			res, err := c.Hit(ctx, charges, nil)
			if err != nil || res.Outcome != driver.OK || claim == nil {
				return res, err
			}
			return c.Hit(ctx, nil, claim)
		}
	}},
	{"duplicate-names-wrong-hook", "C4", func(b *broken) {
		b.hit = func(c driver.Conn, ctx context.Context, charges []driver.Charge, claim *driver.Claim) (driver.Result, error) {
			res, err := c.Hit(ctx, charges, claim)
			if res.Outcome == driver.Duplicate {
				res.HookID = claim.HookID
			}
			return res, err
		}
	}},
	{"duplicate-with-retry-after", "C4", func(b *broken) {
		b.hit = func(c driver.Conn, ctx context.Context, charges []driver.Charge, claim *driver.Claim) (driver.Result, error) {
			res, err := c.Hit(ctx, charges, claim)
			if res.Outcome == driver.Duplicate {
				res.RetryAfter = claim.TTL.Round(time.Millisecond)
			}
			return res, err
		}
	}},
	{"commit-ttl-from-hit", "C5", func(b *broken) {
		var hitAt sync.Map // claim identity → time of its first hit
		inner := b.Conn
		b.hit = func(c driver.Conn, ctx context.Context, charges []driver.Charge, claim *driver.Claim) (driver.Result, error) {
			if claim != nil {
				hitAt.LoadOrStore(claimID(claim), b.now())
			}
			return c.Hit(ctx, charges, claim)
		}
		b.commit = func(c driver.Conn, ctx context.Context, claims []driver.Claim) ([]error, error) {
			shorter := make([]driver.Claim, len(claims))
			for i, cl := range claims {
				if at, ok := hitAt.Load(claimID(&cl)); ok && cl.TTL > b.now().Sub(at.(time.Time)) {
					cl.TTL -= b.now().Sub(at.(time.Time))
				}
				shorter[i] = cl
			}
			return inner.Commit(ctx, shorter)
		}
	}},
	{"pending-retry-after-full-ttl", "C3", func(b *broken) {
		b.hit = func(c driver.Conn, ctx context.Context, charges []driver.Charge, claim *driver.Claim) (driver.Result, error) {
			res, err := c.Hit(ctx, charges, claim)
			if res.Outcome == driver.Pending {
				res.RetryAfter = claim.PendingTTL.Round(time.Millisecond)
			}
			return res, err
		}
	}},
	{"pending-retry-after-rounded-down", "C3", func(b *broken) {
		b.hit = func(c driver.Conn, ctx context.Context, charges []driver.Charge, claim *driver.Claim) (driver.Result, error) {
			res, err := c.Hit(ctx, charges, claim)
			if res.Outcome == driver.Pending && res.RetryAfter > time.Millisecond {
				res.RetryAfter -= time.Millisecond
			}
			return res, err
		}
	}},
	{"pending-retry-after-over-ttl", "C3", func(b *broken) {
		b.hit = func(c driver.Conn, ctx context.Context, charges []driver.Charge, claim *driver.Claim) (driver.Result, error) {
			res, err := c.Hit(ctx, charges, claim)
			if res.Outcome == driver.Pending {
				res.RetryAfter += time.Millisecond // a key's PTTL, one ms longer than the claim
			}
			return res, err
		}
	}},
	{"release-demands-ttl", "C5", func(b *broken) {
		b.release = func(c driver.Conn, ctx context.Context, claims []driver.Claim) ([]error, error) {
			for i := range claims {
				if claims[i].TTL <= 0 {
					return nil, driver.Invalid(fmt.Sprintf("claims[%d].ttl", i), "must be at least 1ms")
				}
			}
			return c.Release(ctx, claims)
		}
	}},
	{"own-retry-rewrites-claim", "C2", func(b *broken) {
		b.hit = func(c driver.Conn, ctx context.Context, charges []driver.Charge, claim *driver.Claim) (driver.Result, error) {
			res, err := c.Hit(ctx, charges, claim)
			if err == nil && res.Outcome == driver.OK && claim != nil {
				// Charges right, but re-takes the claim: a retry pushes out
				// the pending expiry.
				_, _ = c.Release(ctx, []driver.Claim{*claim})
				return c.Hit(ctx, nil, claim)
			}
			return res, err
		}
	}},
	{"remaining-over-stated-by-one", "G10", func(b *broken) {
		// Each taken charge reported one increment short of its lead: the
		// headroom, and so the remaining count, one charge too many.
		b.hit = func(c driver.Conn, ctx context.Context, charges []driver.Charge, claim *driver.Claim) (driver.Result, error) {
			res, err := c.Hit(ctx, charges, claim)
			if res.Outcome == driver.OK {
				for i := range res.Quota() {
					res.Buckets[i].ResetAfter = max(res.Buckets[i].ResetAfter-charges[i].Increment, 0)
				}
			}
			return res, err
		}
	}},
	{"reset-of-wrong-bucket", "G10", func(b *broken) {
		// The states of the first two charges swapped: each kind reports
		// the other's bucket.
		b.hit = func(c driver.Conn, ctx context.Context, charges []driver.Charge, claim *driver.Claim) (driver.Result, error) {
			res, err := c.Hit(ctx, charges, claim)
			if res.NBuckets >= 2 {
				res.Buckets[0], res.Buckets[1] = res.Buckets[1], res.Buckets[0]
			}
			return res, err
		}
	}},
	{"uncharged-reports-a-charge", "G10", func(b *broken) {
		// Duplicate and Pending report the buckets as if they had been
		// charged (the state a charge would leave, not the one that is).
		b.hit = func(c driver.Conn, ctx context.Context, charges []driver.Charge, claim *driver.Claim) (driver.Result, error) {
			res, err := c.Hit(ctx, charges, claim)
			if res.Outcome == driver.Duplicate || res.Outcome == driver.Pending {
				for i := range res.Quota() {
					res.Buckets[i].ResetAfter += charges[i].Increment
				}
			}
			return res, err
		}
	}},
	{"peek-charges", "G11", func(b *broken) {
		// Answers as it stood, and charges what it peeked.
		b.peek = peekThen(func(c driver.Conn, ctx context.Context, charges []driver.Charge) {
			_, _ = c.Hit(ctx, charges, nil)
		})
	}},
	{"peek-resets", "G11", func(b *broken) {
		// Answers as it stood, and forgets the buckets (a read that deletes).
		b.peek = peekThen(func(c driver.Conn, ctx context.Context, charges []driver.Charge) {
			_ = c.Reset(ctx, charges[0].Tenant)
		})
	}},
	{"peek-makes-record", "G11", func(b *broken) {
		// Leaves every peeked bucket as it is, but writes a record for a
		// tenant that has none (a read that creates its key).
		b.peek = peekThen(func(c driver.Conn, ctx context.Context, charges []driver.Charge) {
			keep := driver.Charge{Kind: "keepalive", Tenant: charges[0].Tenant,
				Increment: time.Minute, Capacity: time.Minute}
			_, _ = c.Hit(ctx, []driver.Charge{keep}, nil)
		})
	}},
	{"peek-refreshes-ttl", "G11", func(b *broken) {
		// Leaves every peeked bucket as it is, but moves the expiry of a
		// tenant's record that exists six hours on (a refreshed TTL).
		b.peek = func(c driver.Conn, ctx context.Context, charges []driver.Charge) (driver.Result, error) {
			res, err := c.(driver.Peeker).Peek(ctx, charges)
			for _, q := range res.Quota() {
				if q.ResetAfter > 0 {
					keep := driver.Charge{Kind: "keepalive", Tenant: charges[0].Tenant,
						Increment: 6 * time.Hour, Capacity: 366 * 24 * time.Hour}
					_, _ = c.Hit(ctx, []driver.Charge{keep}, nil)
					break
				}
			}
			return res, err
		}
	}},
	{"peek-of-one-tenant", "G11", func(b *broken) {
		b.peek = peekOf(func(string) string { return "shared" })
	}},
	{"peek-folds-case", "G11", func(b *broken) {
		// A tenant's key folded to lower case: two tenants meet.
		b.peek = peekOf(strings.ToLower)
	}},
	{"quota-admits-max-plus-one", "Q1", func(b *broken) {
		b.hit = onWindows(func(ch *driver.Charge) { ch.Window.Max++ })
	}},
	{"quota-never-starts-over", "Q2", func(b *broken) {
		b.hit = countedHere(b, func(ch *driver.Charge) string { return ch.Tenant + "\x00" + string(ch.Kind) })
	}},
	{"quota-counts-in-the-nodes-window", "Q2", func(b *broken) {
		b.hit = countedHere(b, func(ch *driver.Charge) string {
			return fmt.Sprint(ch.Tenant, "\x00", ch.Kind, "\x00", ch.Window.Edges[1])
		})
	}},
	{"quota-denial-takes-buckets", "Q3", func(b *broken) {
		b.hit = func(c driver.Conn, ctx context.Context, charges []driver.Charge, claim *driver.Claim) (driver.Result, error) {
			res, err := c.Hit(ctx, charges, claim)
			if err == nil && res.Outcome == driver.RateLimited {
				for _, ch := range charges {
					if !ch.IsWindow() {
						_, _ = c.Hit(ctx, []driver.Charge{ch}, nil)
					}
				}
			}
			return res, err
		}
	}},
	{"bucket-denial-counts-quota", "Q3", func(b *broken) {
		b.hit = func(c driver.Conn, ctx context.Context, charges []driver.Charge, claim *driver.Claim) (driver.Result, error) {
			res, err := c.Hit(ctx, charges, claim)
			if err == nil && res.Outcome == driver.RateLimited {
				for _, ch := range charges {
					if ch.IsWindow() {
						_, _ = c.Hit(ctx, []driver.Charge{ch}, nil)
					}
				}
			}
			return res, err
		}
	}},
	{"quota-check-then-count", "Q4", func(b *broken) {
		// Reads the count, then counts in a second call: two Hits at
		// once both see room for one.
		b.hit = func(c driver.Conn, ctx context.Context, charges []driver.Charge, claim *driver.Claim) (driver.Result, error) {
			peeked, err := c.(driver.Peeker).Peek(ctx, charges)
			if err != nil {
				return peeked, err
			}
			time.Sleep(time.Millisecond)
			raised := slices.Clone(charges)
			for i := range raised {
				w := &raised[i].Window
				if raised[i].IsWindow() && peeked.Buckets[i].Used+w.Cost <= w.Max {
					w.Max = driver.MaxWindowUnits
				}
			}
			return c.Hit(ctx, raised, claim)
		}
	}},
	{"quota-outlives-its-window", "Q5", func(b *broken) {
		// The window's record expires 10s after its end; the reset-after
		// reported is still the end's.
		const extra = 10 * time.Second
		b.hit = func(c driver.Conn, ctx context.Context, charges []driver.Charge, claim *driver.Claim) (driver.Result, error) {
			now := b.now().UnixMicro()
			longer := slices.Clone(charges)
			for i := range longer {
				if k := calendar.Holding(longer[i].Window.Edges, now); longer[i].IsWindow() && k >= 0 {
					for j := k + 1; j < 4; j++ {
						longer[i].Window.Edges[j] += extra.Microseconds()
					}
				}
			}
			res, err := c.Hit(ctx, longer, claim)
			for i := range charges {
				if charges[i].IsWindow() && res.Buckets[i].ResetAfter > extra {
					res.Buckets[i].ResetAfter -= extra
				}
			}
			if res.Outcome == driver.RateLimited && res.RetryAfter > extra {
				res.RetryAfter -= extra
			}
			return res, err
		}
	}},
	{"reset-keeps-quota-windows", "Q5", func(b *broken) {
		// Reset puts back each window's count as the last Hit left it.
		var mu sync.Mutex
		seen := map[string]map[driver.Kind]driver.Charge{}
		b.hit = func(c driver.Conn, ctx context.Context, charges []driver.Charge, claim *driver.Claim) (driver.Result, error) {
			res, err := c.Hit(ctx, charges, claim)
			mu.Lock()
			defer mu.Unlock()
			for i, ch := range charges {
				if err == nil && ch.IsWindow() && res.Buckets[i].Used > 0 {
					if seen[ch.Tenant] == nil {
						seen[ch.Tenant] = map[driver.Kind]driver.Charge{}
					}
					ch.Window.Cost, ch.Window.Max = res.Buckets[i].Used, driver.MaxWindowUnits
					seen[ch.Tenant][ch.Kind] = ch
				}
			}
			return res, err
		}
		b.reset = func(c driver.Conn, ctx context.Context, tenant string) error {
			err := c.Reset(ctx, tenant)
			mu.Lock()
			kept := seen[tenant]
			mu.Unlock()
			for _, ch := range kept {
				_, _ = c.Hit(ctx, []driver.Charge{ch}, nil)
			}
			return err
		}
	}},
	{"quota-peek-reads-nothing-used", "Q6", func(b *broken) {
		b.peek = func(c driver.Conn, ctx context.Context, charges []driver.Charge) (driver.Result, error) {
			res, err := c.(driver.Peeker).Peek(ctx, charges)
			for i := range charges {
				res.Buckets[i].Used = 0
			}
			return res, err
		}
	}},
	{"reset-drops-claims", "G5", func(b *broken) {
		var mu sync.Mutex
		seen := map[string][]driver.Claim{}
		b.hit = func(c driver.Conn, ctx context.Context, charges []driver.Charge, claim *driver.Claim) (driver.Result, error) {
			if claim != nil {
				mu.Lock()
				seen[claim.Tenant] = append(seen[claim.Tenant], *claim)
				mu.Unlock()
			}
			return c.Hit(ctx, charges, claim)
		}
		b.reset = func(c driver.Conn, ctx context.Context, tenant string) error {
			mu.Lock()
			claims := seen[tenant]
			mu.Unlock()
			_, _ = c.Release(ctx, claims)
			return c.Reset(ctx, tenant)
		}
	}},
}

// onWindows is a broken Hit: the memory conn's, with every window charge
// changed by f first.
func onWindows(f func(*driver.Charge)) func(driver.Conn, context.Context, []driver.Charge, *driver.Claim) (driver.Result, error) {
	return func(c driver.Conn, ctx context.Context, charges []driver.Charge, claim *driver.Claim) (driver.Result, error) {
		changed := slices.Clone(charges)
		for i := range changed {
			if changed[i].IsWindow() {
				f(&changed[i])
			}
		}
		return c.Hit(ctx, changed, claim)
	}
}

// countedHere is a broken Hit that counts a Hit of window charges alone
// in counts of its own, one per id(charge), whatever window holds the
// store's clock (by tenant and kind alone: the count never starts over;
// by the node's window: nodes of different clocks count apart). The
// reset-after it reports is still the end of the window holding the
// store's clock. Any other Hit is the memory conn's.
func countedHere(b *broken, id func(*driver.Charge) string) func(driver.Conn, context.Context, []driver.Charge, *driver.Claim) (driver.Result, error) {
	var mu sync.Mutex
	counts := map[string]int64{}
	return func(c driver.Conn, ctx context.Context, charges []driver.Charge, claim *driver.Claim) (driver.Result, error) {
		if claim != nil || slices.ContainsFunc(charges, func(ch driver.Charge) bool { return !ch.IsWindow() }) {
			return c.Hit(ctx, charges, claim)
		}
		now := b.now().UnixMicro()
		mu.Lock()
		defer mu.Unlock()
		res := driver.Result{Outcome: driver.OK, NBuckets: len(charges)}
		var wait int64
		for i := range charges {
			ch := &charges[i]
			k := calendar.Holding(ch.Window.Edges, now)
			if k < 0 {
				return driver.Result{}, driver.ErrorReply(errors.New("outside the windows"))
			}
			end := ch.Window.Edges[k+1]
			used := counts[id(ch)]
			res.Buckets[i] = driver.Bucket{Used: used, ResetAfter: time.Duration(end-now) * time.Microsecond}
			if used+ch.Window.Cost > ch.Window.Max {
				wait = max(wait, end-now)
			}
		}
		if wait > 0 {
			res.Outcome, res.RetryAfter = driver.RateLimited, gcra.RetryAfter(wait)
			return res, nil
		}
		for i := range charges {
			counts[id(&charges[i])] += charges[i].Window.Cost
			res.Buckets[i].Used = counts[id(&charges[i])]
		}
		return res, nil
	}
}

// one is the result of a settle of one claim.
func one(errs []error, err error) error {
	if err != nil {
		return err
	}
	return errs[0]
}

func claimID(c *driver.Claim) string { return c.Tenant + "\x00" + c.SourceID + "\x00" + c.Key }

// TestTeeth runs each broken variant through the clause it breaks, on the
// wall clock and on a clock the suite moves, and requires a FAIL on both.
// Every check starts at once, before its subtest pauses (t.Parallel), so
// their sleeps overlap whatever -parallel is.
func TestTeeth(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			wd := newBrokenDriver(nil, v.wrap)
			wall := startCheck(conformance.Config{Driver: wd, URL: "broken://teeth", Records: wd.inner.Records}, v.breaks)
			clock := newManualClock()
			md := newBrokenDriver(clock, v.wrap)
			manual := startCheck(conformance.Config{Driver: md, URL: "broken://teeth", Records: md.inner.Records, Clock: clock}, v.breaks)
			t.Parallel()
			for _, run := range []struct {
				clock string
				done  <-chan checked
			}{{"wall", wall}, {"manual", manual}} {
				t.Run(run.clock, func(t *testing.T) {
					r := <-run.done
					if r.err != nil {
						t.Fatal(r.err)
					}
					if len(r.reports) != 1 || r.reports[0].Status != conformance.Fail {
						t.Fatalf("variant %s: clause %s: %+v, want FAIL", v.name, v.breaks, r.reports)
					}
					t.Logf("%s fails %s as it must: %s", v.name, v.breaks, strings.Join(r.reports[0].Messages, "; "))
				})
			}
		})
	}
	t.Run("ignores-budget", func(t *testing.T) {
		done := startCheck(conformance.Config{Driver: stallDriver{}, URL: "stall://", StallURL: "stall://"}, "T1")
		t.Parallel()
		r := <-done
		if r.err != nil {
			t.Fatal(r.err)
		}
		if r.reports[0].Status != conformance.Fail {
			t.Fatalf("a driver that ignores its budget passed T1: %+v", r.reports[0])
		}
	})
	t.Run("peek-ignores-budget", func(t *testing.T) {
		done := startCheck(conformance.Config{Driver: stallDriver{honest: true, latePeek: true}, URL: "stall://", StallURL: "stall://"}, "T1")
		t.Parallel()
		r := <-done
		if r.err != nil {
			t.Fatal(r.err)
		}
		if r.reports[0].Status != conformance.Fail || !strings.Contains(strings.Join(r.reports[0].Messages, " "), "peek") {
			t.Fatalf("a driver whose Peek ignores its budget passed T1: %+v", r.reports[0])
		}
	})
}

// checked is what conformance.Check returned.
type checked struct {
	reports []conformance.Report
	err     error
}

// startCheck runs clause id of cfg in the background.
func startCheck(cfg conformance.Config, id string) <-chan checked {
	done := make(chan checked, 1)
	go func() {
		reports, err := conformance.Check(cfg, []string{id}, nil)
		done <- checked{reports, err}
	}()
	return done
}

// TestHonestStall is the control for the ignores-budget variant: a store
// that never answers but honours its budget passes T1 and T4.
func TestHonestStall(t *testing.T) {
	reports, err := conformance.Check(conformance.Config{Driver: stallDriver{honest: true}, URL: "stall://", StallURL: "stall://"}, []string{"T1", "T4"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range reports {
		if r.Status != conformance.Pass {
			t.Errorf("%s: %s %v", r.ID, r.Status, r.Messages)
		}
	}
}

// leakyDriver is the honest stallDriver, but for a goroutine it leaves
// behind, running until quit is closed: one started by Open, or one by
// every call (perCall).
type leakyDriver struct {
	perCall bool
	quit    chan struct{}
}

func (d leakyDriver) Open(driver.Config) (driver.Conn, error) {
	if !d.perCall {
		go func() { <-d.quit }()
	}
	return leakyConn{stallConn{honest: true}, d}, nil
}

type leakyConn struct {
	stallConn
	d leakyDriver
}

func (c leakyConn) Hit(ctx context.Context, charges []driver.Charge, claim *driver.Claim) (driver.Result, error) {
	if c.d.perCall {
		go func() { <-c.d.quit }()
	}
	return c.stallConn.Hit(ctx, charges, claim)
}

// TestLeakTeeth: a driver that leaves a goroutine running after Close
// fails T4, while an honest one, checked at the same time in the same
// process, passes: T4 counts the goroutines of its own Store only.
func TestLeakTeeth(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    driver.Driver
		want conformance.Status
	}{
		{"leaks-from-open", leakyDriver{quit: make(chan struct{})}, conformance.Fail},
		{"leaks-from-calls", leakyDriver{perCall: true, quit: make(chan struct{})}, conformance.Fail},
		{"honest-beside-leaks", stallDriver{honest: true}, conformance.Pass},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if d, ok := tc.d.(leakyDriver); ok {
				t.Cleanup(func() { close(d.quit) })
			}
			done := startCheck(conformance.Config{Driver: tc.d, URL: "stall://", StallURL: "stall://"}, "T4")
			t.Parallel()
			r := <-done
			if r.err != nil {
				t.Fatal(r.err)
			}
			if len(r.reports) != 1 || r.reports[0].Status != tc.want {
				t.Fatalf("%s: T4: %+v, want %s", tc.name, r.reports, tc.want)
			}
			t.Logf("%s: T4 %s: %.300s", tc.name, r.reports[0].Status, strings.Join(r.reports[0].Messages, "; "))
		})
	}
}

// noPeekDriver is the memory driver without its optional driver.Peeker:
// its conns have the methods of driver.Conn alone.
type noPeekDriver struct{ inner *memory.Driver }

type noPeekConn struct{ driver.Conn }

func (d noPeekDriver) Open(cfg driver.Config) (driver.Conn, error) {
	c, err := d.inner.Open(cfg)
	return noPeekConn{c}, err
}

// TestPeekOptional: a driver without driver.Peeker is SKIP on G11, the
// capability's clause, and passes the clauses whose calls include Peek for
// a driver that has it (V1 checks Peek's arguments whatever the driver).
func TestPeekOptional(t *testing.T) {
	t.Parallel()
	if _, ok := any(noPeekConn{}).(driver.Peeker); ok {
		t.Fatal("noPeekConn is a driver.Peeker: the test proves nothing")
	}
	reports, err := conformance.Check(conformance.Config{Driver: noPeekDriver{memory.New(nil)},
		URL: "nopeek://x"}, []string{"G11", "T1", "T4", "T6", "V1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range reports {
		want := conformance.Pass
		if r.ID == "G11" {
			want = conformance.Skip
		}
		if r.Status != want {
			t.Errorf("%s: %s %v, want %s", r.ID, r.Status, r.Messages, want)
		}
	}
}
