package fleetstore

import (
	"context"
	"fmt"
	"math/bits"
	"slices"
	"time"

	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/gcra"
)

// maxLead bounds a bucket's reported reset-after: a TAT is at most a
// capacity (366 days) ahead of the now that wrote it, and a node whose
// clock ran ahead (memcached's client clock, G8) may have written it up
// to its skew further; twice the largest capacity leaves room for that.
const maxLead = 2 * gcra.MaxCapacity

// fillQuota completes a driver's report of the charged buckets (CONTRACT
// G10): the driver gives each charge's ResetAfter; the Store sets Kind,
// Headroom (capacity − reset-after, at least 0) and Denied (a charge of a
// RateLimited Hit whose increment exceeds its headroom), so that they
// always agree. A report that cannot be true is an error, for the Store
// to return as ErrUnavailable, never as a decision: a count that is not
// the charges', a reset-after that is negative, not whole µs or beyond any
// TAT, a RateLimited Result that no reported state denies, or whose
// retry-after is not the longest wait those states imply (G3).
func fillQuota(r *Result, charges []Charge) error {
	wait, err := fillBuckets(r, charges, r.Outcome)
	if err != nil || r.Outcome != RateLimited {
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
func fillBuckets(r *Result, charges []Charge, o Outcome) (wait time.Duration, err error) {
	if r.NBuckets != len(charges) {
		return 0, fmt.Errorf("driver reported %d bucket states for %d charges", r.NBuckets,
			len(charges))
	}
	for i := range charges {
		c, b := &charges[i], &r.Buckets[i]
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
			b.Denied = o == OK && b.ResetAfter > c.Capacity || o == RateLimited && over
			continue
		}
		b.Denied = o == RateLimited && over
		if over {
			wait = max(wait, b.ResetAfter+c.Increment-c.Capacity)
		}
	}
	clear(r.Buckets[len(charges):])
	return wait, nil
}

// peekQuota turns a driver's Peek into the Store's answer (CONTRACT G11):
// the buckets of charges as they stand, completed as fillQuota completes
// a Hit's, and the outcome a Hit of charges would have, nothing taken:
// OK, or RateLimited with the denied charges marked and their longest
// wait, rounded up (G2); a shadow charge is Denied when it would deny,
// and denies nothing. Only the driver's NBuckets and reset-afters are
// read.
func peekQuota(r *Result, charges []Charge) error {
	*r = Result{NBuckets: r.NBuckets, Buckets: r.Buckets}
	wait, err := fillBuckets(r, charges, RateLimited)
	if err != nil {
		return err
	}
	r.Outcome = OK
	if wait > 0 {
		r.Outcome, r.RetryAfter = RateLimited, gcra.RetryAfter(wait.Microseconds())
	}
	return nil
}

// forDriver returns charges as a driver is to see them: a shadow charge
// with Shadow unset and the largest capacity, so that it never denies
// (CONTRACT §1.2), in a copy; charges itself, allocating nothing, when
// none is shadow.
func forDriver(charges []Charge) []Charge {
	for i := range charges {
		if charges[i].Shadow {
			out := slices.Clone(charges)
			for j := range out {
				if out[j].Shadow {
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

// hitShadowed is conn.Hit of charges and claim, the shadow charges sent
// as forDriver sends them. A shadow bucket charged whenever its Hit is
// allowed can run more than 366 days ahead, past the capacity it is sent
// with: when the driver refuses only shadow charges (the states it reports
// deny no other), nothing was charged, and the Hit is made again without
// them, the shadow buckets reported as the first answer had them, as they
// stand (CONTRACT §1.2: a shadow charge never denies).
func hitShadowed(ctx context.Context, conn driver.Conn, charges []Charge,
	claim *Claim) (Result, error) {
	if !slices.ContainsFunc(charges, func(c Charge) bool { return c.Shadow }) {
		return conn.Hit(ctx, charges, claim)
	}
	res, err := conn.Hit(ctx, forDriver(charges), claim)
	if err != nil || !shadowOnly(&res, charges) {
		return res, err
	}
	first := res
	var buf [MaxCharges]Charge
	others := buf[:0]
	for _, c := range charges {
		if !c.Shadow {
			others = append(others, c)
		}
	}
	res = Result{Outcome: OK}
	if len(others) > 0 || claim != nil {
		if res, err = conn.Hit(ctx, others, claim); err != nil {
			return res, err
		}
		if res.NBuckets != len(others) {
			return res, nil // fillQuota refuses it
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
func shadowOnly(res *Result, charges []Charge) bool {
	if res.Outcome != RateLimited || res.NBuckets != len(charges) {
		return false
	}
	for i := range charges {
		c, b := &charges[i], &res.Buckets[i]
		if !c.Shadow && b.ResetAfter+c.Increment > c.Capacity {
			return false
		}
	}
	return true
}

// localQuota is fillQuota for a Hit the fallback decided locally (CONTRACT
// §8) on local, the charges at this node's share of shared (localHeadroom).
func localQuota(r *Result, shared, local []Charge) error {
	if err := fillQuota(r, local); err != nil {
		return err
	}
	localHeadroom(r, shared, local)
	return nil
}

// localHeadroom turns the headroom of local buckets, those of local, the
// charges at this node's share of shared, into the shared charges' terms:
// ResetAfter and Denied stay as they stand, Headroom becomes headroom ×
// I/I' rounded down (the local bucket holds floor(headroom'/I') of the
// fleet's charges of I), so that turning it into units by the shared
// limit never over-states what this node has left.
func localHeadroom(r *Result, shared, local []Charge) {
	for i := range shared {
		b := &r.Buckets[i]
		inc := uint64(shared[i].Increment / time.Microsecond)
		localInc := uint64(local[i].Increment / time.Microsecond)
		if inc >= localInc {
			continue // a share of 1: the same bucket
		}
		hi, lo := bits.Mul64(uint64(b.Headroom/time.Microsecond), inc)
		q, _ := bits.Div64(hi, lo, localInc) // < headroom: fits (inc < localInc)
		b.Headroom = time.Duration(q) * time.Microsecond
	}
}
