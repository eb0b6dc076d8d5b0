package faults

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore"
)

// schedSlack is added to the contract's budget + 10ms (T1) wherever a test
// with a few callers checks how long a call took: on a loaded 2-core
// machine under -race, a goroutine whose deadline has passed can wait that
// long to run again. crowdSlack is for the tests with 64 or more callers,
// whose deadlines pass together: each then waits for the others' work on
// 2 cores. The conformance suite allows the same (T1; T4's 50 callers).
const (
	// 60ms: under the pause test's 200ms pause (twice its 100ms budget),
	// so that a driver that waits the pause out instead of keeping its
	// budget takes longer than budget + 10ms + schedSlack and fails.
	schedSlack = 60 * time.Millisecond
	crowdSlack = 3 * schedSlack
)

// A probe measures how late a goroutine wakes from a 1ms sleep while a
// test runs: the machine's share of a call's lateness, which no driver can
// make up for. A call late by a stall needs more than one wake-up to return
// (the goroutine blocked on the socket, then its caller), and with many
// callers it waits behind the others: a test whose probe saw the machine
// stall for more than half its slack (another process hogging the cores)
// allows twice the stall instead.
type probe struct {
	stop  chan struct{}
	done  chan struct{}
	worst time.Duration
}

func startProbe() *probe {
	p := &probe{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for {
			select {
			case <-p.stop:
				return
			default:
			}
			t0 := time.Now()
			time.Sleep(time.Millisecond)
			p.worst = max(p.worst, time.Since(t0)-time.Millisecond)
		}
	}()
	return p
}

// slack stops the probe and returns the scheduling slack a call is allowed:
// base, or twice the probe's worst wake-up delay when that is larger.
func (p *probe) slack(base time.Duration) time.Duration {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	<-p.done
	return max(base, 2*p.worst)
}

func randomName(prefix string) string {
	b := make([]byte, 6)
	rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// openStore opens tg's driver on addr with the budget and extra params
// ("" or "a=1&b=2"), under a random key_prefix, and closes it at Cleanup.
func openStore(t *testing.T, tg target, addr string, budget time.Duration, params string) *fleetstore.Store {
	t.Helper()
	q := "timeout=" + budget.String() + "&key_prefix=" + randomName("faults-")
	if params != "" {
		q += "&" + params
	}
	s, err := fleetstore.Open(tg.url(addr, q))
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// waitReady calls the store until a Hit succeeds (the Valkey driver builds
// its client on the first call), for at most 5s.
func waitReady(t *testing.T, s *fleetstore.Store) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	h := newHooks(randomName("ready-"), 0)
	for {
		_, err := h.hit(s)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("store not ready after 5s: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// hooks makes the calls of one caller: a Hit with a charge that always
// conforms and a claim on a fresh key, as an edge node makes for every
// incoming webhook.
type hooks struct {
	tenant string
	worker int
	seq    int
}

func newHooks(tenant string, worker int) *hooks { return &hooks{tenant: tenant, worker: worker} }

func (h *hooks) next() ([]fleetstore.Charge, fleetstore.Claim) {
	h.seq++
	charges := []fleetstore.Charge{{Kind: fleetstore.Hooks, Tenant: h.tenant, Increment: time.Microsecond, Capacity: time.Hour}}
	claim := fleetstore.Claim{
		Tenant: h.tenant, SourceID: "github", Key: fmt.Sprintf("evt-%d-%d", h.worker, h.seq),
		HookID: fmt.Sprintf("hook-%d-%d", h.worker, h.seq), Node: "faults",
		TTL: time.Minute, PendingTTL: 10 * time.Second,
	}
	return charges, claim
}

func (h *hooks) hit(s *fleetstore.Store) (fleetstore.Claim, error) {
	charges, claim := h.next()
	_, err := s.Hit(context.Background(), charges, &claim)
	return claim, err
}

// A record is one call: when it started, how long it took, how it ended.
type record struct {
	op      string // "hit" or "commit"
	start   time.Time
	took    time.Duration
	outcome fleetstore.Outcome // hit without error
	err     error
}

func (r record) end() time.Time { return r.start.Add(r.took) }

// runLoad starts workers goroutines, each making one Hit (and a Commit of
// its claim when the Hit is OK) at most every pace, until stop is called;
// stop returns every call's record.
func runLoad(s *fleetstore.Store, workers int, pace time.Duration) (stop func() []record) {
	tenant := randomName("load-")
	done := make(chan struct{})
	out := make([][]record, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := newHooks(tenant, w)
			next := time.Now()
			for {
				select {
				case <-done:
					return
				default:
				}
				charges, claim := h.next()
				start := time.Now()
				res, err := s.Hit(context.Background(), charges, &claim)
				out[w] = append(out[w], record{op: "hit", start: start, took: time.Since(start), outcome: res.Outcome, err: err})
				if err == nil && res.Outcome == fleetstore.OK {
					start := time.Now()
					err := s.Commit(context.Background(), claim)
					out[w] = append(out[w], record{op: "commit", start: start, took: time.Since(start), err: err})
				}
				next = paced(next, pace)
			}
		}()
	}
	return func() []record {
		close(done)
		wg.Wait()
		var all []record
		for _, rs := range out {
			all = append(all, rs...)
		}
		sort.Slice(all, func(i, j int) bool { return all[i].start.Before(all[j].start) })
		return all
	}
}

// paced sleeps until next+pace, the time of a worker's next call, and
// returns it; a worker already late starts again from now.
func paced(next time.Time, pace time.Duration) time.Time {
	next = next.Add(pace)
	if d := time.Until(next); d > 0 {
		time.Sleep(d)
		return next
	}
	return time.Now()
}

// A tally sums up the calls of one test.
type tally struct {
	worst                 time.Duration // the longest call
	timeouts, unavailable int
}

// checkCalls fails t for every call that took longer than budget + 10ms
// (T1) + slack, or failed with anything but ErrTimeout or ErrUnavailable.
// With timeoutsOnly — the server accepts and holds connections but is
// slow or silent, so a failure is the budget running out — a failure must
// be ErrTimeout (T1).
func checkCalls(t *testing.T, recs []record, budget, slack time.Duration, timeoutsOnly bool) tally {
	t.Helper()
	limit := budget + 10*time.Millisecond + slack
	var n tally
	reported := 0
	for _, r := range recs {
		n.worst = max(n.worst, r.took)
		bad := ""
		switch {
		case r.err == nil:
		case errors.Is(r.err, fleetstore.ErrTimeout):
			if n.timeouts++; n.timeouts == 1 {
				t.Logf("first timeout: %v", r.err)
			}
		case errors.Is(r.err, fleetstore.ErrUnavailable):
			if n.unavailable++; n.unavailable == 1 {
				t.Logf("first unavailable: %v", r.err)
			}
			if timeoutsOnly {
				bad = fmt.Sprintf("ErrUnavailable where the budget ran out (want ErrTimeout, T1): %v", r.err)
			}
		default:
			bad = fmt.Sprintf("error neither ErrTimeout nor ErrUnavailable: %v", r.err)
		}
		if r.took > limit {
			bad = fmt.Sprintf("took %v, more than budget %v + 10ms + slack %v (err: %v)", r.took, budget, slack, r.err)
		}
		if bad != "" {
			if reported < 10 {
				t.Errorf("%s at %s: %s", r.op, r.start.Format("15:04:05.000"), bad)
			}
			reported++
		}
	}
	if reported > 10 {
		t.Errorf("... and %d more such calls", reported-10)
	}
	return n
}

// firstOK returns the end of the first successful call that started at or
// after from, and whether there is one.
func firstOK(recs []record, from time.Time) (time.Time, bool) {
	var first time.Time
	for _, r := range recs {
		if r.err == nil && !r.start.Before(from) && (first.IsZero() || r.end().Before(first)) {
			first = r.end()
		}
	}
	return first, !first.IsZero()
}

// within returns the records that started in [from, to).
func within(recs []record, from, to time.Time) []record {
	var out []record
	for _, r := range recs {
		if !r.start.Before(from) && r.start.Before(to) {
			out = append(out, r)
		}
	}
	return out
}

func failed(recs []record) int {
	n := 0
	for _, r := range recs {
		if r.err != nil {
			n++
		}
	}
	return n
}
