// Package headers writes a Hit's answer into HTTP response fields for the
// sender: Retry-After, the RateLimit-Policy and RateLimit fields of the
// IETF's draft-ietf-httpapi-ratelimit-headers-10 (27 September 2025), one
// named policy per charged kind, and, on request, the legacy
// X-RateLimit-Limit, X-RateLimit-Remaining and X-RateLimit-Reset.
//
// For a Hit that charged 100 hooks/s burst 200 and 1 MiB/s burst 8 MiB,
// after three hooks of 1 KiB:
//
//	RateLimit-Policy: "hooks";q=200;w=2, "bytes";q=8388608;qu="content-bytes";w=8
//	RateLimit: "hooks";r=197;t=1, "bytes";r=8385534;t=1
//
// Both fields are Structured Field Lists (RFC 9651) of Items: the Item is
// the policy's name, a String (the draft's §3: "The Item value MUST be a
// String"; the limit's kind, [a-z][a-z0-9_]*, so it needs no escape), and
// its Parameters are Integers. A policy's q is the limit's burst in its
// units (hooks, "requests", the draft's default unit; or content bytes,
// qu="content-bytes") and w the seconds an empty bucket takes to fill
// again (its capacity, rounded up, at least 1): a sender that keeps to q
// units every w seconds is never refused. r is what the bucket has left
// after the Hit, rounded down (Limit.Remaining: it never over-states), and
// t, as the draft's §4.1.2 has it since its -10, "the number of seconds
// until additional quota ... is made available": the wait until r grows by
// one unit, rounded up — which, for a bucket the Hit left at r=0, is the
// Retry-After of one more unit, so that Retry-After is never earlier than
// t (§6, "Retry-After ... SHOULD NOT reference a point in time earlier
// than the reset parameter") — and 0 for a full bucket, with nothing more
// to come. Integers are capped at the 15 digits an sf-integer holds. No
// partition key (pk, an optional Byte Sequence) is sent: the partition is
// the tenant, whom the sender already knows as its own endpoint. The
// legacy X-RateLimit-Reset is, as throttled and redis_rate report it, the
// seconds until the bucket is full again (its reset-after, CONTRACT G10).
//
// A calendar quota (fleetstore.NewQuota) is a policy of its own, as the
// draft's §3 writes several: its q is the quota's n, w the length in
// seconds of the calendar window that holds the Hit, r what is left of n
// in it, and t the seconds until the window ends and its count starts
// over (0 for a window not used yet). For 10 hooks a second and 10 000 a
// month, after the first hook of 30 April 00:00 UTC:
//
//	RateLimit-Policy: "hooks";q=10;w=1, "hooks_month";q=10000;w=2592000
//	RateLimit: "hooks";r=9;t=1, "hooks_month";r=9999;t=86400
//
// So w is 2 592 000 for April, 2 678 400 for a month of 31 days and
// 82 800 for a day of 23 hours in a zone whose clocks go forward. It is
// read on Options.Now, the clock the quota's charge was made at. A
// denial by a quota has the same wait as its t in Retry-After.
//
// A Result decided in the degraded mode (Result.Local) reports this node's
// bucket at its share of the limit, so r and t are this node's (t then
// counted in the fleet's units: it may under-state this node's wait),
// while q and w stay the fleet's.
package headers

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/calendar"
)

// Options says which fields Write writes besides the IETF ones, and on
// which clock.
type Options struct {
	// Legacy also writes X-RateLimit-Limit (the burst), -Remaining and
	// -Reset (seconds until full, a delta, rounded up) of one limit: the
	// one nearest exhaustion (the smallest share of its burst left),
	// among those that denied the Hit when it was RateLimited.
	Legacy bool
	// Now is the clock a quota's window is read on, the one its charge
	// was made at (Limit.ChargeAt): w is the length of the calendar
	// window that ends at the bucket's reset (nil: time.Now).
	Now func() time.Time
}

// Write sets on h what res, the answer of a Hit whose charges were made
// from limits (limits[i].Charge made charges[i]), tells the sender:
//
//   - Retry-After, for Pending and RateLimited: res.RetryAfter in whole
//     seconds, rounded up (at least 1);
//   - RateLimit-Policy and RateLimit, one named policy per limit, named by
//     its kind, for every limit whose bucket state the Result holds (a
//     limit whose place in res.Quota() has another kind is left out: its
//     state would be another bucket's), but a shadow limit (Limit.Shadow:
//     it refuses no one, so a sender is not told to slow down for it);
//   - with opts.Legacy, X-RateLimit-*.
//
// It replaces those fields of h: it first deletes every one of them
// (Retry-After, RateLimit-Policy, RateLimit, X-RateLimit-Limit,
// -Remaining, -Reset), so that what an earlier Write left does not
// outlive a Result that does not call for it, and writes nothing else. A
// Result without bucket states (a Hit without charges, or one that
// failed) gets none of the RateLimit fields.
func Write(h http.Header, res *fleetstore.Result, limits []fleetstore.Limit, opts Options) {
	for _, k := range fields {
		h.Del(k)
	}
	if res.Outcome == fleetstore.Pending || res.Outcome == fleetstore.RateLimited {
		h.Set("Retry-After", strconv.FormatInt(RetryAfterSeconds(res.RetryAfter), 10))
	}
	quota := res.Quota()
	now := time.Time{}
	var policy, state strings.Builder
	pick, pickShare, pickDenied := -1, 2.0, false
	for i, l := range limits {
		if i >= len(quota) || quota[i].Kind != l.Kind() || l.IsShadow() {
			continue
		}
		b := quota[i]
		r := l.Remaining(b)
		if policy.Len() > 0 {
			policy.WriteString(", ")
			state.WriteString(", ")
		}
		name := strconv.Quote(string(l.Kind())) // a Kind is [a-z][a-z0-9_]*: a valid sf-string
		policy.WriteString(name)
		policy.WriteString(";q=")
		policy.WriteString(sfInteger(l.Burst()))
		if l.InBytes() {
			policy.WriteString(`;qu="content-bytes"`)
		}
		window, next := l.Capacity(), nextUnit(l, b, r)
		if l.IsQuota() {
			if now.IsZero() {
				now = clock(opts)
			}
			window, next = quotaWindow(l, b, r, now)
		}
		policy.WriteString(";w=")
		policy.WriteString(sfInteger(ceilSeconds(window)))
		state.WriteString(name)
		state.WriteString(";r=")
		state.WriteString(sfInteger(r))
		state.WriteString(";t=")
		state.WriteString(sfInteger(ceilSeconds(next)))

		// A shadow charge's Denied says it would have denied: it did not.
		denied := b.Denied && !b.Shadow
		share := float64(r) / float64(l.Burst())
		if denied && !pickDenied || denied == pickDenied && share < pickShare {
			pick, pickShare, pickDenied = i, share, denied
		}
	}
	if policy.Len() == 0 {
		return
	}
	h.Set("RateLimit-Policy", policy.String())
	h.Set("RateLimit", state.String())
	if opts.Legacy && pick >= 0 {
		l, b := limits[pick], quota[pick]
		h.Set("X-RateLimit-Limit", strconv.FormatInt(l.Burst(), 10))
		h.Set("X-RateLimit-Remaining", strconv.FormatInt(l.Remaining(b), 10))
		h.Set("X-RateLimit-Reset", strconv.FormatInt(ceilSeconds(b.ResetAfter), 10))
	}
}

// fields are the fields Write writes, all deleted first.
var fields = [...]string{
	"Retry-After", "RateLimit-Policy", "RateLimit",
	"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset",
}

// nextUnit is how long until a bucket b of l, with r units left, holds
// one more: until its headroom fits the increment of r+1 units (a charge
// conforms exactly when its increment fits the headroom, G10), at most
// until it is full (its reset-after); 0 for a full bucket.
func nextUnit(l fleetstore.Limit, b fleetstore.Bucket, r int64) time.Duration {
	if r >= l.Burst() || b.ResetAfter <= 0 {
		return 0
	}
	return min(max(l.Charge("", r+1).Increment-b.Headroom, 0), b.ResetAfter)
}

// quotaWindow is a quota's w and t, its bucket b with r units left read
// at now: the length of the calendar window that ends at b's reset (a
// month of 31 days, a day of 23 hours when summer time starts), and the
// time to that reset, when the count starts over; 0 for an unused
// window, with nothing more to come.
func quotaWindow(l fleetstore.Limit, b fleetstore.Bucket, r int64, now time.Time) (window, next time.Duration) {
	end := l.Resets(b, now)
	start, _ := calendar.Window(l.Period(), l.Location(), end.Add(-time.Nanosecond))
	if r < l.Burst() {
		next = b.ResetAfter
	}
	return end.Sub(start), next
}

func clock(opts Options) time.Time {
	if opts.Now != nil {
		return opts.Now()
	}
	return time.Now()
}

// maxSFInteger is the largest Integer of a Structured Field (RFC 9651
// §3.3.1: at most 15 decimal digits).
const maxSFInteger = 999_999_999_999_999

// sfInteger is n as a non-negative sf-integer, capped at maxSFInteger (a
// byte limit's burst or remaining can be larger).
func sfInteger(n int64) string { return strconv.FormatInt(min(max(n, 0), maxSFInteger), 10) }

// RetryAfterSeconds is d as Retry-After's delay-seconds: whole seconds,
// rounded up, at least 1 (a sender told 0 would come straight back); the
// largest Duration is 9 223 372 037, not an overflow.
func RetryAfterSeconds(d time.Duration) int64 { return max(ceilSeconds(d), 1) }

// ceilSeconds is d in whole seconds, rounded up; 0 for d ≤ 0. It does not
// overflow: the largest Duration is 9 223 372 037 seconds.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}
