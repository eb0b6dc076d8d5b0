package faults

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/internal/testing/testserver"
	"github.com/fleetstore/fleetstore/observe"
)

// TestDegradedFleet runs a fleet of 3 nodes (3 Stores with
// fallback_nodes=3 on one server), 2 callers each, every caller making a
// Hit (a charge and a claim on a fresh key) at most every 2ms and a
// Commit of each OK, half of the hooks on a tenant with a limit that
// binds (300 hooks/s, burst 30, fleet-wide) and half on one whose limit
// never does. The server goes away for 2s, while the load runs, in one of
// three ways: kill -9 then a restart on the same port, SIGSTOP then
// SIGCONT (a black hole: connections accepted, nothing answered) and
// CLIENT PAUSE ALL (Redis). Redis runs with appendonly yes and appendfsync
// always, so that its restart keeps what it acknowledged and the test can
// read every commit back; memcached has no persistence, so after its kill
// only the commits made from the kill on can be read back (what it held
// before is gone with it: the outbox replays what the nodes committed
// during the outage, not what the server lost). Asserted:
//
//   - no call fails: every Hit is decided (shared or local) and every
//     Commit is nil (committed or queued);
//   - every call returns within its budget + 10ms + schedSlack; on each
//     node, every call started after the node's first local decision and
//     before the server is back takes at most fastSlack (no budget spent)
//     and every such Hit is local;
//   - the limited tenant's hooks admitted locally stay within the bound of
//     CONTRACT §8: what the fleet's limit admits in the time the nodes
//     decided locally, plus one hook per node;
//   - over the whole run (before, during and after the outage), shared and
//     local decisions together admit at most the bound of CONTRACT §8
//     across an outage (boundAcrossOutage), unless the server forgot its
//     buckets (memcached's kill);
//   - every node is back to shared decisions with an empty outbox within 5s
//     of the server's return; every queued commit was replayed (no
//     conflict: no provider event was delivered twice here);
//   - every hook that got OK and whose Commit was nil is committed in the
//     shared store: a retry of it at another node is a Duplicate naming it.
func TestDegradedFleet(t *testing.T) {
	const (
		budget  = 100 * time.Millisecond
		nodes   = 3
		callers = 2 // per node
		pace    = 2 * time.Millisecond
		outage  = 2 * time.Second
		rate    = 300 // the limited tenant's fleet-wide hooks per second
		burst   = 30
		// fastSlack bounds a call made while the breaker is open: a local
		// decision takes µs; the rest is a loaded 2-core machine under -race.
		fastSlack = 25 * time.Millisecond
	)
	durable := testserver.ConfigLines("appendonly yes", "appendfsync always")
	type way struct {
		name       string
		begin, end func(srv server) error
		losesState bool // the server forgets what it held (a kill without persistence)
	}
	kill := way{name: "kill", begin: func(s server) error { return s.Kill() }, end: func(s server) error { return s.Restart() }}
	blackhole := way{name: "blackhole", begin: func(s server) error { return s.Freeze() }, end: func(s server) error { return s.Thaw() }}
	pause := way{name: "pause", begin: func(s server) error { return s.Pause(outage) }, end: func(server) error { return nil }}
	for _, tc := range []struct {
		tg    target
		start func(t *testing.T) server
		ways  []way
	}{
		{targets[0], func(t *testing.T) server { return startRedis(t, "redis-server", durable) }, []way{kill, blackhole, pause}},
		{targets[2], func(t *testing.T) server { return startMemcached(t) }, []way{{kill.name, kill.begin, kill.end, true}, blackhole}},
	} {
		for _, w := range tc.ways {
			t.Run(tc.tg.name+"/"+w.name, func(t *testing.T) {
				srv := tc.start(t)
				f := openFleet(t, tc.tg, srv.Addr(), nodes, budget)

				pr := startProbe()
				stop := f.load(callers, pace, rate, burst)
				time.Sleep(500 * time.Millisecond)
				outAt := time.Now()
				if err := w.begin(srv); err != nil {
					stop()
					pr.slack(schedSlack)
					t.Fatalf("%s: %v", w.name, err)
				}
				time.Sleep(outage)
				if err := w.end(srv); err != nil {
					stop()
					pr.slack(schedSlack)
					t.Fatalf("end of %s: %v", w.name, err)
				}
				backAt := time.Now() // the server answers again
				if w.name == "pause" {
					backAt = outAt.Add(outage)
				}
				recoveredIn, ok := f.waitRecovered(5 * time.Second)
				time.Sleep(500 * time.Millisecond) // shared decisions after the recovery
				recs := stop()
				slack := pr.slack(schedSlack)
				if !ok {
					t.Errorf("not every node decides shared with an empty outbox 5s after the server is back: %+v", f.stats())
				}

				// No call fails, and each keeps its budget.
				limit := budget + 10*time.Millisecond + slack
				fast := max(fastSlack, slack)
				var worst, worstFast time.Duration
				var bad int
				for _, r := range recs {
					worst = max(worst, r.took)
					switch {
					case r.err != nil:
						bad++
						if bad <= 10 {
							t.Errorf("node %d %s at +%v: %v", r.node, r.op, r.start.Sub(outAt).Round(time.Millisecond), r.err)
						}
					case r.took > limit:
						bad++
						if bad <= 10 {
							t.Errorf("node %d %s at +%v took %v, more than budget %v + 10ms + slack %v", r.node, r.op, r.start.Sub(outAt).Round(time.Millisecond), r.took, budget, slack)
						}
					}
				}
				// After a node's first local decision, until the server is
				// back: local, and fast.
				tripped := make([]time.Time, nodes)
				for _, r := range recs {
					if r.op == "hit" && r.local && !r.start.Before(outAt) && (tripped[r.node].IsZero() || r.end().Before(tripped[r.node])) {
						tripped[r.node] = r.end()
					}
				}
				degradedCalls := 0
				for n, at := range tripped {
					if at.IsZero() {
						t.Errorf("node %d made no local decision during the outage", n)
						continue
					}
					for _, r := range recs {
						if r.node != n || r.start.Before(at) || !r.start.Before(backAt) {
							continue
						}
						degradedCalls++
						worstFast = max(worstFast, r.took)
						if r.took > fast || r.op == "hit" && !r.local {
							bad++
							if bad <= 10 {
								t.Errorf("node %d %s at +%v while degraded: took %v (want ≤ %v), local %v", n, r.op, r.start.Sub(outAt).Round(time.Millisecond), r.took, fast, r.local)
							}
						}
					}
				}
				if bad > 10 {
					t.Errorf("... and %d more such calls", bad-10)
				}

				// The bound on the limited tenant (CONTRACT §8).
				var first, last time.Time
				admitted, localHits := 0, 0
				for _, r := range recs {
					if r.op != "hit" || !r.local {
						continue
					}
					localHits++
					if first.IsZero() || r.start.Before(first) {
						first = r.start
					}
					if r.end().After(last) {
						last = r.end()
					}
					if r.limited && r.outcome == fleetstore.OK {
						admitted++
					}
				}
				window := last.Sub(first)
				bound := int(window.Seconds()*rate) + burst + nodes
				if admitted > bound {
					t.Errorf("the limited tenant's hooks admitted locally: %d in %v, more than the fleet's %d/s burst %d admits + %d nodes = %d", admitted, window.Round(time.Millisecond), rate, burst, nodes, bound)
				}

				// The bound across the outage's edges (CONTRACT §8).
				all, allBound, limitW, allWindow := boundAcrossOutage(recs, nodes, rate, burst)
				if all > allBound && !w.losesState { // a server that forgot its buckets starts them full
					t.Errorf("the limited tenant's hooks admitted shared and locally: %d in %v, more than the bound across an outage %d (the limit's own: %d)", all, allWindow.Round(time.Millisecond), allBound, limitW)
				}

				// Nothing committed is lost, and nothing is queued: once the
				// load stops, every node drains its outbox (a node that a
				// loaded machine tripped again after the recovery too).
				f.waitRecovered(5 * time.Second)
				st := f.stats()
				if st.Outbox != 0 || st.Dropped != 0 || st.Expired != 0 || st.Conflicts != 0 || st.Replayed != st.Queued || st.Queued == 0 {
					t.Errorf("stats summed over the nodes %+v: want some queued, all replayed, none dropped, expired or in conflict, the outbox empty", st)
				}
				checkFrom := time.Time{}
				if w.losesState {
					checkFrom = outAt
				}
				checked, missing := f.readBack(t, recs, checkFrom)
				if missing > 0 {
					t.Errorf("%d of %d committed hooks are not committed in the shared store after the outage", missing, checked)
				}

				firstShared := time.Duration(0)
				for n := range nodes {
					at, ok := time.Time{}, false
					for _, r := range recs {
						if r.node == n && r.op == "hit" && !r.local && r.err == nil && !r.start.Before(backAt) && (!ok || r.end().Before(at)) {
							at, ok = r.end(), true
						}
					}
					if !ok {
						t.Errorf("node %d made no shared decision after the server was back", n)
						continue
					}
					firstShared = max(firstShared, at.Sub(backAt))
				}
				t.Logf("FIGURE degraded driver=%s way=%s budget=%v outage=%v calls=%d local_hits=%d degraded_calls=%d worst=%v worst_degraded=%v slack=%v probe=%v limited_admitted=%d bound=%d window=%v run_admitted=%d run_bound=%d run_limit=%d extra_bursts=%.2f run_window=%v queued=%d replayed=%d conflicts=%d recovered_in=%v first_shared=%v readback=%d",
					tc.tg.name, w.name, budget, outage, len(recs), localHits, degradedCalls, worst.Round(100*time.Microsecond), worstFast.Round(10*time.Microsecond),
					slack.Round(time.Millisecond), pr.worst.Round(time.Millisecond), admitted, bound, window.Round(time.Millisecond),
					all, allBound, limitW, float64(all-limitW)/burst, allWindow.Round(time.Millisecond),
					st.Queued, st.Replayed, st.Conflicts, recoveredIn.Round(time.Millisecond), firstShared.Round(time.Millisecond), checked)
			})
		}
	}
}

// boundAcrossOutage returns how many hooks of the limited tenant (rate per
// second, burst) recs admitted, shared and locally, over the run's window
// W (first Hit's start to last Hit's end), and the bound of CONTRACT §8
// across an outage for it: the shared bucket's (W − u + min(u, C) + C)/I,
// u the longest time between two shared decisions (the shared bucket
// refills then, by C at most), plus each node's local bound
// (t_i + C')/I' + 1 over the time t_i from its first local decision to its
// last, each plus one for rounding; and what the limit alone admits in W,
// (W + C)/I. The times are the client's: a decision is made within its
// call, so W is taken wide and u and the gaps narrow.
func boundAcrossOutage(recs []drec, nodes int, rate, burst int64) (admitted, bound, limit int64,
	window time.Duration) {
	iUS := (time.Second / time.Duration(rate)).Microseconds() // as a driver takes it: whole µs
	cUS := (time.Duration(burst) * (time.Second / time.Duration(rate))).Microseconds()
	iLocal := iUS * int64(nodes) // ceil(I / (1/N)) of a whole-µs I
	cLocal := max(cUS, iLocal)
	var first, last, prevShared time.Time
	var gap time.Duration // u
	firstLocal := make([]time.Time, nodes)
	lastLocal := make([]time.Time, nodes)
	for _, r := range recs { // sorted by start
		if r.op != "hit" || !r.limited || r.err != nil {
			continue
		}
		if first.IsZero() {
			first = r.start
		}
		if r.end().After(last) {
			last = r.end()
		}
		if r.outcome == fleetstore.OK {
			admitted++
		}
		if !r.local {
			if !prevShared.IsZero() {
				gap = max(gap, r.start.Sub(prevShared))
			}
			if r.end().After(prevShared) {
				prevShared = r.end()
			}
			continue
		}
		if firstLocal[r.node].IsZero() {
			firstLocal[r.node] = r.start
		}
		if r.end().After(lastLocal[r.node]) {
			lastLocal[r.node] = r.end()
		}
	}
	window = last.Sub(first)
	w, u := window.Microseconds(), gap.Microseconds()
	bound = (w-u+min(u, cUS)+cUS)/iUS + 1
	for n := range nodes {
		if !firstLocal[n].IsZero() {
			bound += (lastLocal[n].Sub(firstLocal[n]).Microseconds()+cLocal)/iLocal + 1
		}
	}
	return admitted, bound, (w + cUS) / iUS, window
}

// fleet is the nodes of one degraded-mode test: Stores with a fallback on
// one server, under one key_prefix.
type fleet struct {
	nodes []*fleetstore.Store
	// reader reads the shared store back after the outage: no fallback and
	// a wide budget, so that a loaded machine's slow reply is not taken for
	// an outage and answered locally.
	reader    *fleetstore.Store
	tenant    string // the limited tenant; tenant+"-open" never limited
	mu        sync.Mutex
	conflicts []fleetstore.Conflict
}

func openFleet(t *testing.T, tg target, addr string, n int, budget time.Duration) *fleet {
	t.Helper()
	f := &fleet{tenant: randomName("fleet-")}
	prefix := randomName("degraded-")
	for range n {
		q := fmt.Sprintf("timeout=%v&key_prefix=%s&fallback_nodes=%d", budget, prefix, n)
		s, err := fleetstore.Open(tg.url(addr, q), fleetstore.WithFallback(fleetstore.Fallback{OnConflict: func(c fleetstore.Conflict) {
			f.mu.Lock()
			f.conflicts = append(f.conflicts, c)
			f.mu.Unlock()
		}}))
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		t.Cleanup(func() { s.Close() })
		f.nodes = append(f.nodes, s)
	}
	r, err := fleetstore.Open(tg.url(addr, fmt.Sprintf("timeout=2s&key_prefix=%s", prefix)))
	if err != nil {
		t.Fatalf("open the reader: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	f.reader = r
	for _, s := range f.nodes {
		h := newHooks(randomName("ready-"), 0)
		charges, claim := h.next()
		deadline := time.Now().Add(5 * time.Second)
		for {
			res, err := s.Hit(context.Background(), charges, &claim)
			if err == nil && !res.Local {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node not deciding shared after 5s: %+v %v", res, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return f
}

// A drec is one call of the degraded-mode test.
type drec struct {
	node    int
	op      string // "hit" or "commit"
	start   time.Time
	took    time.Duration
	outcome fleetstore.Outcome
	local   bool
	limited bool // on the limited tenant
	claim   fleetstore.Claim
	err     error
}

func (r drec) end() time.Time { return r.start.Add(r.took) }

// load starts callers goroutines per node, as runLoad does, and returns
// stop, which ends them and returns every call's record.
func (f *fleet) load(callers int, pace time.Duration, rate, burst int64) (stop func() []drec) {
	inc := time.Second / time.Duration(rate)
	limited := fleetstore.Charge{Kind: fleetstore.Hooks, Tenant: f.tenant, Increment: inc, Capacity: time.Duration(burst) * inc}
	open := fleetstore.Charge{Kind: fleetstore.Hooks, Tenant: f.tenant + "-open", Increment: time.Microsecond, Capacity: time.Hour}
	done := make(chan struct{})
	var mu sync.Mutex
	var all []drec
	var wg sync.WaitGroup
	for n, s := range f.nodes {
		for w := range callers {
			wg.Go(func() {
				var mine []drec
				next := time.Now()
				for seq := 0; ; seq++ {
					select {
					case <-done:
						mu.Lock()
						all = append(all, mine...)
						mu.Unlock()
						return
					default:
					}
					ch := open
					if seq%2 == 0 {
						ch = limited
					}
					claim := fleetstore.Claim{Tenant: ch.Tenant, SourceID: "github", Key: fmt.Sprintf("evt-%d-%d-%d", n, w, seq),
						HookID: fmt.Sprintf("hook-%d-%d-%d", n, w, seq), Node: fmt.Sprintf("node-%d", n), TTL: time.Minute, PendingTTL: 30 * time.Second}
					start := time.Now()
					res, err := s.Hit(context.Background(), []fleetstore.Charge{ch}, &claim)
					mine = append(mine, drec{node: n, op: "hit", start: start, took: time.Since(start), outcome: res.Outcome, local: res.Local, limited: seq%2 == 0, claim: claim, err: err})
					if err == nil && res.Outcome == fleetstore.OK {
						start := time.Now()
						err := s.Commit(context.Background(), claim)
						mine = append(mine, drec{node: n, op: "commit", start: start, took: time.Since(start), claim: claim, err: err})
					}
					next = paced(next, pace)
				}
			})
		}
	}
	return func() []drec {
		close(done)
		wg.Wait()
		sort.Slice(all, func(i, j int) bool { return all[i].start.Before(all[j].start) })
		return all
	}
}

// waitRecovered waits until every node decides shared with an empty
// outbox, for at most d, and returns how long it took.
func (f *fleet) waitRecovered(d time.Duration) (time.Duration, bool) {
	start := time.Now()
	for {
		ok := true
		for _, s := range f.nodes {
			if st := s.FallbackStats(); st.Degraded || st.Outbox > 0 {
				ok = false
			}
		}
		if ok {
			return time.Since(start), true
		}
		if time.Since(start) > d {
			return time.Since(start), false
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// stats sums the nodes' Stats.
func (f *fleet) stats() observe.Stats {
	var sum observe.Stats
	for _, s := range f.nodes {
		st := s.FallbackStats()
		sum.Degraded = sum.Degraded || st.Degraded
		sum.Outages += st.Outages
		sum.LocalDecisions += st.LocalDecisions
		sum.Outbox += st.Outbox
		sum.Queued += st.Queued
		sum.Replayed += st.Replayed
		sum.Conflicts += st.Conflicts
		sum.Expired += st.Expired
		sum.Dropped += st.Dropped
		sum.ClaimsDropped += st.ClaimsDropped
	}
	return sum
}

// readBack retries, at the next node, every hook of recs whose Hit was OK
// and whose Commit was nil and started at or after from: a retry (another
// hook_id, no charge) must be a shared Duplicate naming the hook, or the
// hook a reported conflict. It returns how many it checked and how many
// were not committed.
func (f *fleet) readBack(t *testing.T, recs []drec, from time.Time) (checked, missing int) {
	t.Helper()
	var todo []drec
	for _, r := range recs {
		if r.op == "commit" && r.err == nil && !r.start.Before(from) {
			todo = append(todo, r)
		}
	}
	f.mu.Lock()
	holder := make(map[string]string)
	for _, c := range f.conflicts {
		holder[c.Claim.HookID] = c.Holder
	}
	f.mu.Unlock()
	var mu sync.Mutex
	var wg sync.WaitGroup
	const readers = 8
	for i := range readers {
		wg.Go(func() {
			for j := i; j < len(todo); j += readers {
				r := todo[j]
				retry := r.claim
				retry.HookID = "retry-" + r.claim.HookID
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				res, err := f.reader.Hit(ctx, nil, &retry)
				cancel()
				want := r.claim.HookID
				if h, ok := holder[want]; ok {
					want = h
				}
				if err != nil || res.Local || res.Outcome != fleetstore.Duplicate || res.HookID != want {
					mu.Lock()
					if missing++; missing <= 10 {
						t.Errorf("retry of %s (committed at +%v by node %d): %+v %v, want a shared Duplicate of %s",
							r.claim.Key, r.start.Sub(recs[0].start).Round(time.Millisecond), r.node, res, err, want)
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return len(todo), missing
}
