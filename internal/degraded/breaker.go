package degraded

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/fleetstore/fleetstore/observe"
)

// breaker is the degraded mode's breaker (CONTRACT §8). Closed, calls go
// to the shared store; open, they are decided locally at once, and the
// worker probes the shared store with a backoff until it answers. The
// transitions are ordered by one lock, under which each runs what it
// tells (its log line, its snapshot of the counters): two outages never
// interleave their lines.
type breaker struct {
	isOpen atomic.Bool // read by every call

	mu    sync.Mutex
	cause error         // of the current outage
	since time.Time     // when it began
	was   observe.Stats // the counters then

	// The probe's backoff, the worker's own (one worker at a time).
	backoff   time.Duration
	closedAt  time.Time // when the last outage ended
	notified  bool      // the worker has told of the current outage (began)
	minWait   time.Duration
	maxWait   time.Duration
	stableFor time.Duration
}

// newBreaker is a closed breaker whose probe waits from minWait, doubling
// up to maxWait; an outage that begins within stableFor of the last one's
// end continues that one's backoff.
func newBreaker(minWait, maxWait, stableFor time.Duration) *breaker {
	return &breaker{minWait: minWait, maxWait: maxWait, stableFor: stableFor}
}

// open opens the breaker for cause, at now, unless it is open: under its
// lock, opening runs first (it counts and logs the outage, and returns the
// counters then), then calls go local. It reports whether this call
// opened it.
func (b *breaker) open(cause error, now time.Time, opening func() observe.Stats) bool {
	if b.isOpen.Load() {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.isOpen.Load() {
		return false
	}
	b.cause, b.since = cause, now
	b.was = opening()
	b.isOpen.Store(true)
	return true
}

// close closes the breaker at now: under its lock, closing is told when
// the outage began and the counters then (it logs the outage's figures),
// then calls go shared.
func (b *breaker) close(now time.Time, closing func(since time.Time, was observe.Stats)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	closing(b.since, b.was)
	b.closedAt = now
	b.isOpen.Store(false)
}

// outage returns the current outage's cause.
func (b *breaker) outage() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cause
}

// began starts the worker's part of an outage at now: it reports true the
// first time it is called for this outage, and sets the backoff to its
// least, or continues the last outage's when that ended within stableFor.
func (b *breaker) began(now time.Time) bool {
	if b.notified {
		return false
	}
	b.notified = true
	if b.closedAt.IsZero() || now.Sub(b.closedAt) > b.stableFor {
		b.backoff = b.minWait
	} else {
		b.backoff = min(2*max(b.backoff, b.minWait), b.maxWait)
	}
	return true
}

// ended ends the worker's part of an outage (the breaker closed).
func (b *breaker) ended() { b.notified = false }

// wait is how long the worker waits before its next probe: drawn by rnd
// from [backoff/2, backoff]; rnd(n) is in [0, n).
func (b *breaker) wait(rnd func(int64) int64) time.Duration {
	half := b.backoff / 2
	return half + time.Duration(rnd(int64(half)+1))
}

// failed doubles the backoff after a probe or replay that failed, up to
// maxWait.
func (b *breaker) failed() { b.backoff = min(2*b.backoff, b.maxWait) }
