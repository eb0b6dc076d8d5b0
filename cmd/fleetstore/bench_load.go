package main

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/gcra"
)

// Latencies are recorded in ns, from 1ns to a minute, to 3 significant
// digits.
const (
	histMin    = 1
	histMax    = int64(time.Minute)
	histDigits = 3
)

func newHist() *hdrhistogram.Histogram { return hdrhistogram.New(histMin, histMax, histDigits) }

func record(h *hdrhistogram.Histogram, d time.Duration) {
	_ = h.RecordValue(min(max(int64(d), histMin), histMax)) // in range: never fails
}

// The providers whose event ids the hooks carry.
var sources = []string{"github", "stripe", "svix", "shopify"}

// recentSize is how many recently claimed keys each worker keeps for
// duplicates to reuse.
const recentSize = 256

// load is one bench run's workers and what they share.
type load struct {
	store   *fleetstore.Store
	cfg     *benchConfig
	limits  []kindLimit
	tenants []string
	run     string
	workers []*worker
}

func newLoad(store *fleetstore.Store, cfg *benchConfig, limits []kindLimit) *load {
	l := &load{store: store, cfg: cfg, limits: limits, run: runID()}
	l.tenants = make([]string, cfg.tenants)
	for i := range l.tenants {
		l.tenants[i] = "bench-" + l.run + "-t" + strconv.Itoa(i)
	}
	seed := rand.Uint64()
	l.workers = make([]*worker, cfg.concurrency)
	for i := range l.workers {
		w := &worker{id: i, l: l, hit: newHist(), commit: newHist(), samples: make(map[errClass]string)}
		w.rng = rand.New(rand.NewPCG(seed, uint64(i)))
		if cfg.skew > 1 {
			w.zipf = rand.NewZipf(w.rng, cfg.skew, 1, uint64(cfg.tenants-1))
		}
		w.charges = make([]fleetstore.Charge, len(limits))
		for k, lim := range limits {
			w.charges[k] = fleetstore.Charge{Kind: lim.kind, Increment: lim.increment,
				Capacity: lim.capacity}
		}
		w.prefix = []byte("evt-" + l.run + "-" + strconv.Itoa(i) + "-")
		l.workers[i] = w
	}
	return l
}

// errClass is how an error is counted: by the fleetstore sentinel it
// matches.
type errClass int

const (
	classTimeout errClass = iota
	classUnavailable
	classClaimLost
	classOther
	numClasses
)

var classNames = [numClasses]string{"timeout", "unavailable", "claim_lost", "other"}

func classify(err error) errClass {
	switch {
	case errors.Is(err, fleetstore.ErrTimeout):
		return classTimeout
	case errors.Is(err, fleetstore.ErrUnavailable):
		return classUnavailable
	case errors.Is(err, fleetstore.ErrClaimLost):
		return classClaimLost
	}
	return classOther
}

// counters are one worker's counts. Only the worker writes them; the
// progress line reads them, hence atomics (uncontended: one writer).
type counters struct {
	outcomes   [fleetstore.RateLimited + 1]atomic.Uint64 // by Outcome
	local      atomic.Uint64                             // Hits decided locally (Result.Local)
	hitErrs    [numClasses]atomic.Uint64
	commits    atomic.Uint64 // committed without error
	commitErrs [numClasses]atomic.Uint64
}

func (c *counters) hits() uint64 {
	var n uint64
	for i := range c.outcomes {
		n += c.outcomes[i].Load()
	}
	for i := range c.hitErrs {
		n += c.hitErrs[i].Load()
	}
	return n
}

// eventKey is a claimed provider event: what a duplicate delivery repeats.
type eventKey struct {
	tenant, source int
	key            string
}

// worker is one hook in flight at a time. Its histograms, counters and
// samples are its own until the run ends; only recent is read by others.
type worker struct {
	id      int
	l       *load
	rng     *rand.Rand
	zipf    *rand.Zipf // nil: tenants uniform
	charges []fleetstore.Charge
	prefix  []byte // of this worker's event keys
	buf     []byte
	seq     uint64

	hit, commit *hdrhistogram.Histogram
	n           counters
	samples     map[errClass]string // the first error of each class

	recent [recentSize]atomic.Pointer[eventKey]
	next   int

	_ [64]byte // keep the next worker's hot fields off this one's cache lines
}

// run takes hooks until ctx is done. Calls that start before measureFrom
// are warm-up: made, not recorded.
func (w *worker) run(ctx context.Context, measureFrom time.Time) {
	cfg := w.l.cfg
	store := w.l.store
	claim := &fleetstore.Claim{Node: "bench", TTL: cfg.ttl, PendingTTL: cfg.pendingTTL}
	// Calls run on the store's own budget, not the run's deadline: a call
	// that starts just before the end must not be counted as a timeout.
	callCtx := context.WithoutCancel(ctx)
	for ctx.Err() == nil {
		ev, fresh := w.event()
		w.seq++
		tenant := w.l.tenants[ev.tenant]
		w.charge(tenant)
		claim.Tenant, claim.SourceID, claim.Key = tenant, sources[ev.source], ev.key
		claim.HookID = w.hookID()

		t0 := time.Now()
		res, err := store.Hit(callCtx, w.charges, claim)
		t1 := time.Now()
		if err != nil && ctx.Err() != nil {
			return // cut short by the end of the run: not a store error
		}
		measured := !t0.Before(measureFrom)
		if measured {
			record(w.hit, t1.Sub(t0))
			if err != nil {
				w.fail(&w.n.hitErrs, "hit", err)
			} else {
				w.n.outcomes[res.Outcome].Add(1)
				if res.Local {
					w.n.local.Add(1)
				}
			}
		}
		if err != nil || res.Outcome != fleetstore.OK {
			continue
		}
		if fresh {
			w.remember(ev)
		}
		if cfg.hold > 0 {
			sleep(ctx, cfg.hold)
		}

		t2 := time.Now()
		err = store.Commit(callCtx, *claim)
		t3 := time.Now()
		if err != nil && ctx.Err() != nil {
			return
		}
		if measured {
			record(w.commit, t3.Sub(t2))
			if err != nil {
				w.fail(&w.n.commitErrs, "commit", err)
			} else {
				w.n.commits.Add(1)
			}
		}
	}
}

// event returns the next hook's event: with probability dup a recently
// claimed one from any worker (a provider re-delivery: Duplicate once
// committed, Pending while not), else a fresh key of a tenant drawn from
// the Zipf (or uniform) distribution.
func (w *worker) event() (ev *eventKey, fresh bool) {
	cfg := w.l.cfg
	if cfg.dup > 0 && w.rng.Float64() < cfg.dup {
		other := w.l.workers[w.rng.IntN(len(w.l.workers))]
		if ev := other.recent[w.rng.IntN(recentSize)].Load(); ev != nil {
			return ev, false
		}
	}
	var t int
	if w.zipf != nil {
		t = int(w.zipf.Uint64())
	} else {
		t = w.rng.IntN(cfg.tenants)
	}
	w.buf = strconv.AppendUint(append(w.buf[:0], w.prefix...), w.seq, 10)
	return &eventKey{tenant: t, source: w.rng.IntN(len(sources)), key: string(w.buf)}, true
}

func (w *worker) remember(ev *eventKey) {
	w.recent[w.next].Store(ev)
	w.next = (w.next + 1) % recentSize
}

// hookID is unique per hook (a re-delivery is a new hook with the same
// event key).
func (w *worker) hookID() string {
	w.buf = append(w.buf[:0], "hook-"...)
	w.buf = strconv.AppendInt(w.buf, int64(w.id), 10)
	w.buf = append(w.buf, '-')
	w.buf = strconv.AppendUint(w.buf, w.seq, 10)
	return string(w.buf)
}

// charge sets the tenant of every charge and the bytes charge's increment
// for a body of random size.
func (w *worker) charge(tenant string) {
	cfg := w.l.cfg
	for k := range w.charges {
		c := &w.charges[k]
		c.Tenant = tenant
		lim := &w.l.limits[k]
		if lim.bytesPerSecond > 0 {
			size := min(cfg.body/2+w.rng.Int64N(cfg.body+1), lim.burstBytes)
			// in range: checked by limits
			c.Increment, _, _ = gcra.ByteRate(lim.bytesPerSecond, lim.burstBytes, size)
		}
	}
}

func (w *worker) fail(counts *[numClasses]atomic.Uint64, op string, err error) {
	class := classify(err)
	counts[class].Add(1)
	if _, ok := w.samples[class]; !ok {
		w.samples[class] = op + ": " + oneLine(err)
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// pingBaseline times Store.Ping alone (concurrency 1) for up to d or 5000
// pings: the store's bare round trip, to set Hit's latency against.
func pingBaseline(ctx context.Context, store *fleetstore.Store, d time.Duration) *pingReport {
	const maxPings = 5000
	h := newHist()
	var errs [numClasses]uint64
	var sample string
	end := time.Now().Add(d)
	for i := 0; i < maxPings && ctx.Err() == nil; i++ {
		t0 := time.Now()
		if !t0.Before(end) {
			break
		}
		err := store.Ping(context.WithoutCancel(ctx))
		t1 := time.Now()
		if err != nil && ctx.Err() != nil {
			break
		}
		record(h, t1.Sub(t0))
		if err != nil {
			errs[classify(err)]++
			if sample == "" {
				sample = "ping: " + oneLine(err)
			}
		}
	}
	return &pingReport{hist: h, errs: errs, sample: sample}
}
