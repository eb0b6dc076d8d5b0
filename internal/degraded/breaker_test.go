package degraded

import (
	"errors"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore/observe"
)

// TestBreakerOpensOnce: of two opens, only the first runs its opening and
// takes its cause; a close lets the next outage open it again.
func TestBreakerOpensOnce(t *testing.T) {
	b := newBreaker(minProbe, maxProbe, stableAfter)
	t0 := time.Unix(1000, 0)
	first, second := errors.New("first"), errors.New("second")
	opened := 0
	opening := func() observe.Stats { opened++; return observe.Stats{Outages: uint64(opened)} }
	if !b.open(first, t0, opening) || !b.isOpen.Load() {
		t.Fatal("a closed breaker did not open")
	}
	if b.open(second, t0.Add(time.Second), opening) {
		t.Error("an open breaker opened again")
	}
	if opened != 1 || b.outage() != first {
		t.Errorf("opening ran %d times, cause %v; want once, %v", opened, b.outage(), first)
	}
	var since time.Time
	var was observe.Stats
	b.close(t0.Add(2*time.Second), func(s time.Time, w observe.Stats) { since, was = s, w })
	if b.isOpen.Load() || !since.Equal(t0) || was.Outages != 1 {
		t.Errorf("closed: open %v, since %v, counters then %+v; want closed, since %v, 1 outage",
			b.isOpen.Load(), since, was, t0)
	}
	if !b.open(second, t0.Add(3*time.Second), opening) || b.outage() != second {
		t.Errorf("the next outage did not open it with its cause: %v", b.outage())
	}
}

// TestBreakerBackoff: the probe waits from minProbe, doubling up to
// maxProbe, each wait within [b/2, b]; an outage within stableAfter of the
// last one's end continues its backoff, a later one starts again.
func TestBreakerBackoff(t *testing.T) {
	b := newBreaker(minProbe, maxProbe, stableAfter)
	t0 := time.Unix(1000, 0)
	if !b.began(t0) || b.began(t0) {
		t.Fatal("began did not report the first call of an outage only")
	}
	lo := func(n int64) int64 { return 0 }
	hi := func(n int64) int64 { return n - 1 }
	if w := b.wait(lo); w != minProbe/2 {
		t.Errorf("shortest first wait %v, want %v", w, minProbe/2)
	}
	if w := b.wait(hi); w != minProbe {
		t.Errorf("longest first wait %v, want %v", w, minProbe)
	}
	for range 10 {
		b.failed()
	}
	if w := b.wait(hi); w != maxProbe {
		t.Errorf("wait after 10 failures %v, want the cap %v", w, maxProbe)
	}
	b.backoff = 4 * minProbe
	b.close(t0, func(time.Time, observe.Stats) {})
	b.ended()
	if b.began(t0.Add(stableAfter / 2)); b.backoff != 8*minProbe {
		t.Errorf("backoff of a flap %v, want the last one's doubled, %v", b.backoff, 8*minProbe)
	}
	b.close(t0, func(time.Time, observe.Stats) {})
	b.ended()
	if b.began(t0.Add(2 * stableAfter)); b.backoff != minProbe {
		t.Errorf("backoff of a later outage %v, want %v", b.backoff, minProbe)
	}
}
