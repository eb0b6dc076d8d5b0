// Package headers writes a Hit's answer into HTTP response fields for the
// sender: Retry-After, the RateLimit-Policy and RateLimit fields of the
// IETF's draft-ietf-httpapi-ratelimit-headers, one named policy per
// charged kind, and, on request, the legacy X-RateLimit-Limit,
// X-RateLimit-Remaining and X-RateLimit-Reset.
//
// For a Hit that charged 100 hooks/s burst 200 and 1 MiB/s burst 8 MiB,
// after three hooks of 1 KiB:
//
//	RateLimit-Policy: "hooks";q=200;w=2, "bytes";q=8388608;qu="content-bytes";w=8
//	RateLimit: "hooks";r=197;t=1, "bytes";r=8385534;t=1
//
// A policy's q is the limit's burst in its units (hooks, or content bytes:
// qu="content-bytes") and w the seconds an empty bucket takes to fill
// again (its capacity, rounded up, at least 1): a sender that keeps to q
// units every w seconds is never refused. r is what the bucket has left
// after the Hit, rounded down (Limit.Remaining: it never over-states), t
// the seconds until it is full again (its reset-after, rounded up), both
// from the Result's bucket states (CONTRACT G10). A Result decided in the
// degraded mode (Result.Local) reports this node's bucket at its share of
// the limit, so r and t are this node's, while q and w stay the fleet's.
package headers

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/fleetstore/fleetstore"
)

// Options says which fields Write writes besides the IETF ones.
type Options struct {
	// Legacy also writes X-RateLimit-Limit (the burst), -Remaining and
	// -Reset (seconds until full, a delta, rounded up) of one limit: the
	// one nearest exhaustion (the smallest share of its burst left),
	// among those that denied the Hit when it was RateLimited.
	Legacy bool
}

// Write sets on h what res, the answer of a Hit whose charges were made
// from limits (limits[i].Charge made charges[i]), tells the sender:
//
//   - Retry-After, for Pending and RateLimited: res.RetryAfter in whole
//     seconds, rounded up (at least 1);
//   - RateLimit-Policy and RateLimit, one named policy per limit, named by
//     its kind, for every limit whose bucket state the Result holds (a
//     limit whose place in res.Quota() has another kind is left out: its
//     state would be another bucket's);
//   - with opts.Legacy, X-RateLimit-*.
//
// It replaces those fields of h and writes nothing else. A Result without
// bucket states (a Hit without charges, or one that failed) gets none of
// the RateLimit fields.
func Write(h http.Header, res *fleetstore.Result, limits []fleetstore.Limit, opts Options) {
	if res.Outcome == fleetstore.Pending || res.Outcome == fleetstore.RateLimited {
		h.Set("Retry-After", strconv.FormatInt(RetryAfterSeconds(res.RetryAfter), 10))
	}
	quota := res.Quota()
	var policy, state strings.Builder
	pick, pickShare, pickDenied := -1, 2.0, false
	for i, l := range limits {
		if i >= len(quota) || quota[i].Kind != l.Kind() {
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
		policy.WriteString(strconv.FormatInt(l.Burst(), 10))
		if l.Bytes() {
			policy.WriteString(`;qu="content-bytes"`)
		}
		policy.WriteString(";w=")
		policy.WriteString(strconv.FormatInt(ceilSeconds(l.Capacity()), 10))
		state.WriteString(name)
		state.WriteString(";r=")
		state.WriteString(strconv.FormatInt(r, 10))
		state.WriteString(";t=")
		state.WriteString(strconv.FormatInt(ceilSeconds(b.ResetAfter), 10))

		share := float64(r) / float64(l.Burst())
		if b.Denied && !pickDenied || b.Denied == pickDenied && share < pickShare {
			pick, pickShare, pickDenied = i, share, b.Denied
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

// RetryAfterSeconds is d as Retry-After's delay-seconds: whole seconds,
// rounded up, at least 1 (a sender told 0 would come straight back).
func RetryAfterSeconds(d time.Duration) int64 { return max(ceilSeconds(d), 1) }

// ceilSeconds is d in whole seconds, rounded up; 0 for d ≤ 0.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}
