// Package failover drives a Store opened on a Sentinel URL through a
// SENTINEL FAILOVER under load, and measures what its callers see: how
// many calls failed and how, the slowest call, how long after the command
// calls reached the new master, and how many claims were taken on the old
// master after it had been replaced (and so were lost). The redis and
// valkey drivers' tests run it against testserver.StartSentinel.
package failover

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/internal/scripts"
	"github.com/fleetstore/fleetstore/internal/testing/testserver"
)

// Callers is the number of goroutines calling the Store at once.
const Callers = 4

// Figures are what Run measured. Times are from the SENTINEL FAILOVER
// command.
type Figures struct {
	Calls       int           // Hits and Commits made from the command on
	Failed      int           // of those, failed: ErrTimeout or ErrUnavailable
	Timeouts    int           // failed with ErrTimeout
	Slowest     time.Duration // the slowest call of the whole run
	OverBudget  int           // calls that took longer than budget + slack
	Switched    time.Duration // until every Sentinel named the new master, ROLE master
	FirstFailed time.Duration // the first failed call's end (0: none failed)
	LastFailed  time.Duration // the last failed call's end
	NewMaster   time.Duration // the end of the first Hit that wrote to the new master
	Claims      int           // claims taken (Hit OK) over the whole run
	Lost        int           // of those, missing on the new master: taken on the old after promotion
	Errors      []string      // the distinct messages of the failed calls, at most 5
}

// record is one call.
type record struct {
	startAt, endAt time.Time
	start, end     time.Duration    // since the command, set once it is known
	ok             bool             // a Hit that took its claim
	claim          fleetstore.Claim // the claim, for a Hit
	err            error
}

// Run calls st from Callers goroutines (a Hit with a charge and a claim,
// then a Commit of the claim when it was taken), for a warm-up second,
// then sends SENTINEL FAILOVER and goes on until the new master has been
// in place for 3s. It fails t when a call returns anything but success,
// ErrTimeout or ErrUnavailable, when a call takes longer than budget +
// slack, when the failover does not happen within 30s, or when no Hit
// reaches the new master within 10s of the switch (the Store must follow
// it without being reopened). prefix is st's key_prefix. The figures are
// logged as FIGURE lines and returned.
func Run(
	t *testing.T, st *fleetstore.Store, prefix string, s *testserver.Sentinel,
	budget, slack time.Duration,
) Figures {
	t.Helper()
	oldMaster, err := s.Master()
	if err != nil {
		t.Fatal(err)
	}
	var newMaster *testserver.Redis
	for _, n := range s.Nodes {
		if n != oldMaster {
			newMaster = n
		}
	}

	var (
		mu      sync.Mutex
		records []record
		stop    = make(chan struct{})
		wg      sync.WaitGroup
	)
	// The machine's own stalls (another process on the 2 cores, a GC
	// pause) delay every call alike: slack grows to twice the worst
	// wake-up delay seen while the test runs, as the fault suite's does.
	var stall time.Duration
	probeDone := make(chan struct{})
	go func() {
		defer close(probeDone)
		for {
			select {
			case <-stop:
				return
			default:
			}
			t0 := time.Now()
			time.Sleep(time.Millisecond)
			stall = max(stall, time.Since(t0)-time.Millisecond)
		}
	}()
	tenants := make([]string, Callers)
	for i := range Callers {
		tenants[i] = "failover-" + strconv.Itoa(i)
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				claim := fleetstore.Claim{
					Tenant: tenants[i], SourceID: "s", Key: strconv.Itoa(n), HookID: "h" + strconv.Itoa(n),
					TTL: time.Hour, PendingTTL: time.Hour,
				}
				rec := call(budget, func(ctx context.Context) (bool, error) {
					ch := fleetstore.Charge{Kind: fleetstore.Hooks, Tenant: tenants[i],
						Increment: time.Microsecond, Capacity: time.Second}
					res, err := st.Hit(ctx, []fleetstore.Charge{ch}, &claim)
					return err == nil && res.Outcome == fleetstore.OK, err
				})
				rec.claim = claim
				recs := []record{rec}
				if rec.ok {
					crec := call(budget, func(ctx context.Context) (bool, error) {
						return false, st.Commit(ctx, claim)
					})
					recs = append(recs, crec)
				}
				mu.Lock()
				records = append(records, recs...)
				mu.Unlock()
			}
		})
	}

	time.Sleep(time.Second) // warm-up: connections and scripts in place
	t0 := time.Now()
	if err := s.Failover(); err != nil {
		close(stop)
		wg.Wait()
		t.Fatalf("SENTINEL FAILOVER: %v", err)
	}
	err = s.WaitMaster(newMaster, 30*time.Second)
	switched := time.Since(t0)
	if err == nil {
		time.Sleep(3 * time.Second)
	}
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatalf("failover: %v", err)
	}

	f := Figures{Switched: switched}
	mu.Lock()
	defer mu.Unlock()
	for i := range records {
		records[i].start, records[i].end = records[i].startAt.Sub(t0), records[i].endAt.Sub(t0)
	}
	var taken []int // records[i] of the Hits that took a claim
	for i, r := range records {
		if r.ok {
			taken = append(taken, i)
		}
	}
	present, err := exist(newMaster, prefix, records, taken)
	if err != nil {
		t.Fatalf("claims on the new master: %v", err)
	}
	f.NewMaster = -1
	for _, i := range taken {
		r := records[i]
		f.Claims++
		if !present[i] {
			f.Lost++
		} else if r.start >= switched && (f.NewMaster < 0 || r.end < f.NewMaster) {
			f.NewMaster = r.end // started after the switch, kept: written to the new master
		}
	}
	<-probeDone
	slack = max(slack, 2*stall)
	for _, r := range records {
		d := r.end - r.start
		f.Slowest = max(f.Slowest, d)
		if d > budget+slack {
			f.OverBudget++
			t.Errorf("a call took %v (budget %v + slack %v), ended %v after the command: %v",
				d, budget, slack, r.end, r.err)
		}
		if r.start < 0 {
			if r.err != nil {
				t.Errorf("a call failed before the failover: %v", r.err)
			}
			continue
		}
		f.Calls++
		if r.err == nil {
			continue
		}
		f.Failed++
		if f.FirstFailed == 0 || r.end < f.FirstFailed {
			f.FirstFailed = r.end
		}
		f.LastFailed = max(f.LastFailed, r.end)
		if msg := r.err.Error(); len(f.Errors) < 5 && !slices.Contains(f.Errors, msg) {
			f.Errors = append(f.Errors, msg)
		}
		switch {
		case errors.Is(r.err, fleetstore.ErrTimeout):
			f.Timeouts++
		case errors.Is(r.err, fleetstore.ErrUnavailable):
		default:
			t.Errorf("a call during the failover: %v, want ErrTimeout or ErrUnavailable", r.err)
		}
	}
	ms := time.Millisecond
	t.Logf("FIGURE failover: switched (every Sentinel names the new master, ROLE master) "+
		"%v after SENTINEL FAILOVER", f.Switched.Round(ms))
	t.Logf("FIGURE failover: %d callers, %d calls after the command, %d failed "+
		"(%d ErrTimeout, %d ErrUnavailable), first %v, last %v after the command",
		Callers, f.Calls, f.Failed, f.Timeouts, f.Failed-f.Timeouts,
		f.FirstFailed.Round(ms), f.LastFailed.Round(ms))
	for _, msg := range f.Errors {
		t.Logf("FIGURE failover: failed with: %s", msg)
	}
	t.Logf("FIGURE failover: slowest call %v, %d over budget %v + slack %v",
		f.Slowest.Round(ms), f.OverBudget, budget, slack)
	if f.NewMaster < 0 {
		t.Errorf("no Hit reached the new master in the 3s after the switch: the Store did not follow it")
	} else {
		t.Logf("FIGURE failover: first Hit written to the new master ended %v after the "+
			"command (%v after the switch)", f.NewMaster.Round(ms), (f.NewMaster - f.Switched).Round(ms))
	}
	t.Logf("FIGURE failover: %d claims taken, %d lost (taken on the old master after the "+
		"replica was promoted, before the clients switched)", f.Claims, f.Lost)
	return f
}

// call runs one call with a budget's context and records it.
func call(budget time.Duration, do func(context.Context) (bool, error)) record {
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	start := time.Now()
	ok, err := do(ctx)
	return record{startAt: start, endAt: time.Now(), ok: ok, err: err}
}

// exist reports which of records[taken]'s claims have a live record on
// node (scripts.Present, which finds a claim in its tenant's shards).
func exist(
	node *testserver.Redis, prefix string, records []record, taken []int,
) (map[int]bool, error) {
	present := make(map[int]bool, len(taken))
	for chunk := range slices.Chunk(taken, 2000) {
		claims := make([]fleetstore.Claim, len(chunk))
		for j, i := range chunk {
			claims[j] = records[i].claim
		}
		keys := scripts.PresentCall(prefix, claims)
		args := append([]string{"EVAL", scripts.Present.Source, strconv.Itoa(len(keys))}, keys...)
		v, err := node.Do(args...)
		if err != nil {
			return nil, err
		}
		idx, ok := v.([]any)
		if !ok {
			return nil, fmt.Errorf("unexpected reply %T", v)
		}
		for _, x := range idx {
			n, _ := x.(int64)
			if n < 1 || int(n) > len(chunk) {
				return nil, fmt.Errorf("unexpected index %v", x)
			}
			present[chunk[n-1]] = true
		}
	}
	return present, nil
}
