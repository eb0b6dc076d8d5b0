// Package checked is a driver's Conn as the Store calls it: a shadow
// charge is handed to the driver as a driver takes one (CONTRACT §1.2),
// and every answer is checked and completed before the Store or its
// degraded mode reads it (G3, G10, G11, C10). An answer that cannot be
// true is an error marked as the server's reply (driver.ErrorReply): the
// Store returns it as ErrUnavailable, and its degraded mode decides
// locally on it. The root package and internal/degraded share it; the
// root cannot be imported from here.
package checked

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/gcra"
)

// Conn is a driver's Conn, its Hit and Peek taking the Store's charges
// (shadow marked) and every answer checked (New).
type Conn struct {
	c          driver.Conn
	p          driver.Peeker // c, when it can Peek; nil when not
	needsTimer bool          // c is not a driver.NonBlocking
}

// New returns c checked. Its Peek is that of c's driver.Peeker; the Store
// calls it only when c has one (CanPeek).
func New(c driver.Conn) *Conn {
	p, _ := c.(driver.Peeker)
	_, nb := c.(driver.NonBlocking)
	return &Conn{c: c, p: p, needsTimer: !nb}
}

// NeedsTimer reports whether a call needs a budget timer (T1): false when
// the driver's Conn is a driver.NonBlocking, whose calls never wait.
func (c *Conn) NeedsTimer() bool { return c.needsTimer }

// CanPeek reports whether the driver's Conn is a driver.Peeker.
func (c *Conn) CanPeek() bool { return c.p != nil }

// Hit is the driver's Hit of charges as a driver takes them (ForDriver),
// its Result checked (CheckResult) and completed (FillQuota) in the terms
// of charges.
func (c *Conn) Hit(ctx context.Context, charges []driver.Charge,
	claim *driver.Claim) (driver.Result, error) {
	res, err := HitShadowed(ctx, c.c, charges, claim)
	if err != nil {
		return driver.Result{}, err
	}
	if err := CheckResult(&res); err != nil {
		return driver.Result{}, driver.ErrorReply(err)
	}
	if err := FillQuota(&res, charges); err != nil {
		return driver.Result{}, driver.ErrorReply(err)
	}
	return res, nil
}

// Peek is the driver's Peek of charges as a driver takes them, its answer
// turned into the Store's (PeekQuota). Called only when CanPeek.
func (c *Conn) Peek(ctx context.Context, charges []driver.Charge) (driver.Result, error) {
	res, err := c.p.Peek(ctx, ForDriver(charges))
	if err != nil {
		return driver.Result{}, err
	}
	if err := PeekQuota(&res, charges); err != nil {
		return driver.Result{}, driver.ErrorReply(err)
	}
	return res, nil
}

// Commit is the driver's Commit; an answer that is not one result per
// claim is an error.
func (c *Conn) Commit(ctx context.Context, claims []driver.Claim) ([]error, error) {
	errs, err := c.c.Commit(ctx, claims)
	return counted(len(claims), errs, err)
}

// Release is the driver's Release; an answer that is not one result per
// claim is an error.
func (c *Conn) Release(ctx context.Context, claims []driver.Claim) ([]error, error) {
	errs, err := c.c.Release(ctx, claims)
	return counted(len(claims), errs, err)
}

// counted is a settle's answer for n claims: errs, when they are n.
func counted(n int, errs []error, err error) ([]error, error) {
	if err != nil {
		return nil, err
	}
	if len(errs) != n {
		return nil, driver.ErrorReply(ResultCount(len(errs), n))
	}
	return errs, nil
}

// Reset is the driver's Reset.
func (c *Conn) Reset(ctx context.Context, tenant string) error { return c.c.Reset(ctx, tenant) }

// Ping is the driver's Ping.
func (c *Conn) Ping(ctx context.Context) error { return c.c.Ping(ctx) }

// Close is the driver's Close.
func (c *Conn) Close() error { return c.c.Close() }

// ResultCount is the error of a driver that answered a batch of n claims
// with another number of results (a driver bug: the store cannot be
// trusted with that batch).
func ResultCount(got, n int) error {
	return fmt.Errorf("driver returned %d results for %d claims", got, n)
}

// CheckResult refuses a driver's Result that is no decision: one marked
// Local (only the Store's degraded mode decides locally, CONTRACT §1.2),
// an invalid outcome, an OK or Duplicate with a retry-after, a Duplicate
// without its committer, a Pending or RateLimited whose retry-after is not
// whole ms ≥ 1ms.
func CheckResult(r *driver.Result) error {
	if r.Local {
		return errors.New("driver returned a result marked local " +
			"(only the Store's fallback decides locally)")
	}
	switch r.Outcome {
	case driver.OK, driver.Duplicate:
		if r.RetryAfter != 0 {
			return fmt.Errorf("driver returned %v with retry-after %v (want none)", r.Outcome,
				r.RetryAfter)
		}
		if r.Outcome == driver.Duplicate && r.HookID == "" {
			return errors.New("driver returned duplicate without the committer's hook_id")
		}
		return nil
	case driver.Pending, driver.RateLimited:
		if r.RetryAfter < time.Millisecond || r.RetryAfter%time.Millisecond != 0 {
			return fmt.Errorf("driver returned %v with retry-after %v (want whole ms ≥ 1ms)",
				r.Outcome, r.RetryAfter)
		}
		return nil
	}
	return fmt.Errorf("driver returned invalid outcome %d", int(r.Outcome))
}

// maxLead bounds a bucket's reported reset-after: a TAT is at most a
// capacity (366 days) ahead of the now that wrote it, and a node whose
// clock ran ahead (memcached's client clock, G8) may have written it up
// to its skew further; twice the largest capacity leaves room for that.
const maxLead = 2 * gcra.MaxCapacity

// FillQuota completes a driver's report of the charged buckets (CONTRACT
// G10): the driver gives each charge's ResetAfter; the Store sets Kind,
// Headroom (capacity − reset-after, at least 0) and Denied (a charge of a
// RateLimited Hit whose increment exceeds its headroom), so that they
// always agree. A window charge's report (CONTRACT §3.2) is its Used and
// ResetAfter; its Headroom is 0, it is Denied when its count and cost
// exceed its max, and its wait is the time to the window's end. A report
// that cannot be true is an error, for the Store to return as
// ErrUnavailable, never as a decision: a count that is not the charges',
// a reset-after that is negative, not whole µs or beyond any TAT, a
// window's count or reset-after out of range (fillWindow), a count
// reported for a GCRA charge, a RateLimited Result that no reported state
// denies, or whose retry-after is not the longest wait those states imply
// (G3).
func FillQuota(r *driver.Result, charges []driver.Charge) error {
	wait, err := fillBuckets(r, charges, r.Outcome)
	if err != nil || r.Outcome != driver.RateLimited {
		return err
	}
	if wait == 0 {
		return fmt.Errorf("driver returned rate_limited, "+
			"but none of its %d bucket states denies a charge", len(charges))
	}
	if want := gcra.RetryAfter(wait.Microseconds()); r.RetryAfter != want {
		return fmt.Errorf("driver returned rate_limited with retry-after %v, "+
			"but its bucket states say %v", r.RetryAfter, want)
	}
	return nil
}

// fillBuckets checks the driver's reset-after of every charge's bucket
// and sets its Kind, Headroom, Shadow and Denied as a Hit of outcome o
// has them; wait is the longest wait of the charges, not shadow, that do
// not conform now (0: every one conforms).
func fillBuckets(r *driver.Result, charges []driver.Charge, o driver.Outcome) (
	wait time.Duration, err error) {
	if r.NBuckets != len(charges) {
		return 0, fmt.Errorf("driver reported %d bucket states for %d charges", r.NBuckets,
			len(charges))
	}
	for i := range charges {
		c, b := &charges[i], &r.Buckets[i]
		if c.IsWindow() {
			w, err := fillWindow(i, c, b, o)
			if err != nil {
				return 0, err
			}
			wait = max(wait, w)
			continue
		}
		if b.Used != 0 {
			return 0, fmt.Errorf("driver reported %d used for charges[%d], a GCRA charge "+
				"(want 0)", b.Used, i)
		}
		if b.ResetAfter < 0 || b.ResetAfter > maxLead || b.ResetAfter%time.Microsecond != 0 {
			return 0, fmt.Errorf("driver reported reset-after %v for charges[%d] "+
				"(want whole µs, 0 to %v)", b.ResetAfter, i, maxLead)
		}
		b.Kind, b.Shadow = c.Kind, c.Shadow
		b.Headroom = max(c.Capacity-b.ResetAfter, 0)
		// The charge conforms now exactly when its increment fits the
		// headroom; its wait is what it lacks (gcra.Charge's allow − now).
		over := b.ResetAfter+c.Increment > c.Capacity
		if c.Shadow {
			// Sent with the largest capacity, it denied nothing; read
			// against its own (CONTRACT §1.2): taken on OK, as it stands otherwise.
			b.Denied = o == driver.OK && b.ResetAfter > c.Capacity ||
				o == driver.RateLimited && over
			continue
		}
		b.Denied = o == driver.RateLimited && over
		if over {
			wait = max(wait, b.ResetAfter+c.Increment-c.Capacity)
		}
	}
	clear(r.Buckets[len(charges):])
	return wait, nil
}

// fillWindow checks the driver's report of charges[i], a window charge
// (CONTRACT §3.2), and sets b's Kind, Headroom (0), Shadow and Denied as
// a Hit of outcome o has them: Used is the window's count, 0 to
// MaxWindowUnits, ResetAfter the time to the window's end, whole µs, at
// least 1µs and at most the longest of the charge's windows. wait is the
// time to that end when the charge does not conform now (count + cost
// over max), 0 when it does or is shadow.
func fillWindow(i int, c *driver.Charge, b *driver.Bucket, o driver.Outcome) (
	wait time.Duration, err error) {
	win := &c.Window
	if b.Used < 0 || b.Used > driver.MaxWindowUnits {
		return 0, fmt.Errorf("driver reported %d used for charges[%d] (want 0 to %d)", b.Used, i,
			int64(driver.MaxWindowUnits))
	}
	var longest int64
	for j := 1; j < len(win.Edges); j++ {
		longest = max(longest, win.Edges[j]-win.Edges[j-1])
	}
	if b.ResetAfter < time.Microsecond || b.ResetAfter%time.Microsecond != 0 ||
		b.ResetAfter.Microseconds() > longest {
		return 0, fmt.Errorf("driver reported reset-after %v for charges[%d], a window charge "+
			"(want whole µs, 1µs to the longest window, %v)", b.ResetAfter, i,
			time.Duration(longest)*time.Microsecond)
	}
	b.Kind, b.Shadow, b.Headroom = c.Kind, c.Shadow, 0
	over := b.Used > win.Max-win.Cost // the count as it stands and the cost exceed max
	if c.Shadow {
		// Sent with the largest max, it denied nothing; read against
		// its own (CONTRACT §1.2): counted on OK, as it stands otherwise.
		b.Denied = o == driver.OK && b.Used > win.Max || o == driver.RateLimited && over
		return 0, nil
	}
	b.Denied = o == driver.RateLimited && over
	if over {
		return b.ResetAfter, nil
	}
	return 0, nil
}

// PeekQuota turns a driver's Peek into the Store's answer (CONTRACT G11):
// the buckets of charges as they stand, completed as FillQuota completes
// a Hit's, and the outcome a Hit of charges would have, nothing taken:
// OK, or RateLimited with the denied charges marked and their longest
// wait, rounded up (G2); a shadow charge is Denied when it would deny,
// and denies nothing. Only the driver's NBuckets and reset-afters are
// read.
func PeekQuota(r *driver.Result, charges []driver.Charge) error {
	*r = driver.Result{NBuckets: r.NBuckets, Buckets: r.Buckets}
	wait, err := fillBuckets(r, charges, driver.RateLimited)
	if err != nil {
		return err
	}
	r.Outcome = driver.OK
	if wait > 0 {
		r.Outcome, r.RetryAfter = driver.RateLimited, gcra.RetryAfter(wait.Microseconds())
	}
	return nil
}

// HitShadowed is conn.Hit of charges and claim, the shadow charges sent
// as ForDriver sends them. A shadow bucket charged whenever its Hit is
// allowed can run more than 366 days ahead, past the capacity it is sent
// with: when the driver refuses only shadow charges (the states it reports
// deny no other), nothing was charged, and the Hit is made again without
// them, the shadow buckets reported as the first answer had them, as they
// stand (CONTRACT §1.2: a shadow charge never denies).
func HitShadowed(ctx context.Context, conn driver.Conn, charges []driver.Charge,
	claim *driver.Claim) (driver.Result, error) {
	if !slices.ContainsFunc(charges, func(c driver.Charge) bool { return c.Shadow }) {
		return conn.Hit(ctx, charges, claim)
	}
	res, err := conn.Hit(ctx, ForDriver(charges), claim)
	if err != nil || !shadowOnly(&res, charges) {
		return res, err
	}
	first := res
	var buf [driver.MaxCharges]driver.Charge
	others := buf[:0]
	for _, c := range charges {
		if !c.Shadow {
			others = append(others, c)
		}
	}
	res = driver.Result{Outcome: driver.OK}
	if len(others) > 0 || claim != nil {
		if res, err = conn.Hit(ctx, others, claim); err != nil {
			return res, err
		}
		if res.NBuckets != len(others) {
			return res, nil // FillQuota refuses it
		}
	}
	j := len(others)
	for i := len(charges) - 1; i >= 0; i-- { // in place, from the end
		if charges[i].Shadow {
			res.Buckets[i] = first.Buckets[i]
		} else {
			j--
			res.Buckets[i] = res.Buckets[j]
		}
	}
	res.NBuckets = len(charges)
	return res, nil
}

// shadowOnly reports whether a RateLimited res, as a driver reported it,
// denies only shadow charges: no other charge's state denies it.
func shadowOnly(res *driver.Result, charges []driver.Charge) bool {
	if res.Outcome != driver.RateLimited || res.NBuckets != len(charges) {
		return false
	}
	for i := range charges {
		c, b := &charges[i], &res.Buckets[i]
		if c.Shadow {
			continue
		}
		if c.IsWindow() && b.Used > c.Window.Max-c.Window.Cost ||
			!c.IsWindow() && b.ResetAfter+c.Increment > c.Capacity {
			return false
		}
	}
	return true
}

// ForDriver returns charges as a driver is to see them: a shadow charge
// with Shadow unset and the largest capacity, or a shadow window charge
// with the largest max, so that it never denies (CONTRACT §1.2), in a copy; charges itself, allocating nothing, when
// none is shadow.
func ForDriver(charges []driver.Charge) []driver.Charge {
	for i := range charges {
		if charges[i].Shadow {
			out := slices.Clone(charges)
			for j := range out {
				if out[j].Shadow && out[j].IsWindow() {
					w := &out[j].Window
					out[j].Shadow = false
					w.Max, w.Cost = driver.MaxWindowUnits, min(w.Cost, driver.MaxWindowUnits)
				} else if out[j].Shadow {
					out[j].Shadow = false
					out[j].Capacity = gcra.MaxCapacity
					out[j].Increment = min(out[j].Increment, gcra.MaxCapacity)
				}
			}
			return out
		}
	}
	return charges
}
