// Package gcra is the Generic Cell Rate Algorithm of CONTRACT §3 in integer
// microseconds: pure functions, no clock. It is the reference the memory
// driver and the conformance suite use, and the Lua scripts of the
// Redis-like drivers transcribe it.
//
// A bucket is one number, its TAT (theoretical arrival time, µs). A charge of
// increment I (the emission interval times the cost) against capacity C (the
// burst capacity: I × burst for one-unit charges) at time now:
//
//	t       = max(tat, now)   // an absent or expired bucket is full: tat = now
//	new_tat = t + I
//	allow   = new_tat - C
//	conform = allow <= now
//
// A conforming charge stores new_tat, and the bucket may be forgotten once
// new_tat has passed. A non-conforming one writes nothing and waits
// allow - now, reported in whole milliseconds rounded up (G2).
package gcra

import "time"

// Decision is the outcome of one charge.
type Decision struct {
	// Conform is true when the charge is allowed.
	Conform bool
	// TAT is the bucket's new TAT in µs when Conform (store it, expiring
	// at TAT); otherwise the unchanged TAT.
	TAT int64
	// Wait is how long until the charge would conform, in µs (0 when
	// Conform). Report it with RetryAfter.
	Wait int64
}

// Charge applies one charge of increment µs against capacity µs to a bucket
// whose stored TAT is tat µs (0 or any value ≤ now for an absent bucket), at
// now µs. All values are integers; the caller guarantees
// 1 ≤ increment ≤ capacity and that now + capacity does not overflow.
func Charge(now, tat, increment, capacity int64) Decision {
	t := max(tat, now)
	newTAT := t + increment
	allow := newTAT - capacity
	if allow <= now {
		return Decision{Conform: true, TAT: newTAT}
	}
	return Decision{TAT: tat, Wait: allow - now}
}

// RetryAfterMillis turns a wait in µs into the retry-after of CONTRACT §3:
// whole milliseconds, rounded up, at least 1.
func RetryAfterMillis(waitMicros int64) int64 {
	if waitMicros <= 1000 {
		return 1
	}
	return (waitMicros + 999) / 1000
}

// RetryAfter is RetryAfterMillis as a time.Duration: the retry-after a
// driver reports for a wait of waitMicros µs (a denied charge's Wait, a
// pending claim's remaining time), whole milliseconds rounded up, at least
// 1ms (G2, C3).
func RetryAfter(waitMicros int64) time.Duration {
	return time.Duration(RetryAfterMillis(waitMicros)) * time.Millisecond
}

// ResetAfter is the time until a bucket whose TAT is tat µs is full again,
// at now µs: the TAT's lead over now, never negative (CONTRACT G10). After
// a conforming charge it is the new TAT's lead; after a denial, or for a
// Hit that charged nothing, the stored TAT's.
func ResetAfter(now, tat int64) int64 { return max(tat-now, 0) }

// Headroom is what is left of a bucket of capacity µs whose TAT is tat µs,
// at now µs: the capacity minus the TAT's lead over now, never negative
// (G10). A charge of increment I conforms at now exactly when
// I ≤ Headroom(now, tat, capacity).
func Headroom(now, tat, capacity int64) int64 { return max(capacity-ResetAfter(now, tat), 0) }
