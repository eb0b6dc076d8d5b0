// Package degradedtest holds the degraded mode's (CONTRACT §8) test
// sequences that run on more than one driver: the root package's tests
// run them on the memory driver, faults/ on real servers.
package degradedtest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/observe"
)

// Fleet is two nodes of one shared store for ReplayMeetsPending: A with
// the fallback (Fallback.OnConflict set to Conflicts.Add), B reaching the
// shared store directly.
type Fleet struct {
	A, B *fleetstore.Store
	// Cut and Back take A's path to the shared store away and give it
	// back (Cut may find it away already).
	Cut, Back func()
	// PendingTTL is hook-b's PendingTTL, and Expire lets that time pass
	// for the shared store: a sleep when RealTime, else a clock moved (the
	// claim never expires before).
	PendingTTL time.Duration
	RealTime   bool
	Expire     func()
	Conflicts  *Conflicts
}

// Conflicts collects what Fallback.OnConflict is handed.
type Conflicts struct {
	mu  sync.Mutex
	got []fleetstore.Conflict
}

// Add is a Fallback.OnConflict.
func (l *Conflicts) Add(c fleetstore.Conflict) {
	l.mu.Lock()
	l.got = append(l.got, c)
	l.mu.Unlock()
}

// All returns what Add was handed, in order.
func (l *Conflicts) All() []fleetstore.Conflict {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]fleetstore.Conflict(nil), l.got...)
}

// Ends are the ways hook-b's pending claim ends in ReplayMeetsPending.
var Ends = []string{"released", "expired", "committed", "released, A closed"}

// ReplayMeetsPending: nothing committed is lost when the replay meets
// another hook's pending claim (CONTRACT §8). A's path is out;
// A.Hit(E, hook-a) is OK locally and A.Commit queues it. The provider's
// retry reaches B: B.Hit(E, hook-b) is OK from the shared store, hook-b
// pending. A's path comes back and A replays: that is no conflict yet, the
// commit waits, and A decides shared again. Then hook-b's claim, as end
// says, is
//
//   - released (its sink failed), or expires after PendingTTL (its node
//     died): A's commit lands, and a claim-only Hit on E at either node is
//     a Duplicate naming hook-a, not OK (an event admitted again though
//     hook-a was stored);
//   - committed: a conflict, counted and handed to OnConflict, holder
//     hook-b, and E is a Duplicate naming hook-b;
//   - released, and A closed at once: Close's last replay lands the
//     commit, though its next try was not due.
func ReplayMeetsPending(t *testing.T, f *Fleet, end string) {
	ctx := context.Background()
	claim := func(hook, node string, pendingTTL time.Duration) fleetstore.Claim {
		return fleetstore.Claim{Tenant: "acme", SourceID: "github", Key: "evt-E", HookID: hook,
			Node: node, TTL: time.Hour, PendingTTL: pendingTTL}
	}
	charge := []fleetstore.Charge{{Kind: fleetstore.Hooks, Tenant: "acme",
		Increment: time.Microsecond, Capacity: time.Hour}}
	hookA := claim("hook-a", "node-a", time.Minute)
	hookB := claim("hook-b", "node-b", f.PendingTTL)

	f.Cut()
	res, err := f.A.Hit(ctx, charge, &hookA)
	if err != nil || res.Outcome != fleetstore.OK || !res.Local {
		t.Fatalf("A.Hit during the outage: %+v %v, want a local OK", res, err)
	}
	if err := f.A.Commit(ctx, hookA); err != nil {
		t.Fatalf("A.Commit during the outage: %v, want nil (queued)", err)
	}
	if s := f.A.FallbackStats(); s.Outbox != 1 {
		t.Fatalf("A's stats %+v, want 1 queued", s)
	}
	bAt := time.Now()
	res, err = f.B.Hit(ctx, charge, &hookB)
	if err != nil || res.Outcome != fleetstore.OK || res.Local {
		t.Fatalf("B.Hit: %+v %v, want a shared OK (hook-b pending)", res, err)
	}

	f.Back()
	var s observe.Stats
	if !WaitFor(10*time.Second, func() bool { s = f.A.FallbackStats(); return !s.Degraded }) {
		t.Fatalf("A still degraded 10s after its path came back: %+v", s)
	}
	if s.Conflicts != 0 {
		t.Errorf("A's stats %+v: the replay meeting hook-b's pending claim counted a conflict, "+
			"want the commit to wait", s)
	}
	if (!f.RealTime || time.Since(bAt) < f.PendingTTL-time.Second) && s.Outbox != 1 {
		t.Errorf("A's stats %+v, want the commit still queued while hook-b's claim is pending", s)
	}

	switch end {
	case "released", "released, A closed":
		if err := f.B.Release(ctx, hookB); err != nil {
			t.Fatalf("B.Release: %v", err)
		}
		if end != "released" {
			if err := f.A.Close(); err != nil {
				t.Fatalf("A.Close: %v", err)
			}
		}
	case "expired":
		f.Expire()
	case "committed":
		if err := f.B.Commit(ctx, hookB); err != nil {
			t.Fatalf("B.Commit: %v", err)
		}
	default:
		t.Fatalf("no end %q", end)
	}
	if !WaitFor(10*time.Second, func() bool { s = f.A.FallbackStats(); return s.Outbox == 0 }) {
		t.Errorf("A's outbox not empty 10s after hook-b's claim was %s: %+v", end, s)
	}
	want, got := "hook-a", f.Conflicts.All()
	if end == "committed" {
		want = "hook-b"
		if s.Conflicts != 1 || s.Replayed != 0 || len(got) != 1 || got[0].Holder != "hook-b" ||
			got[0].Claim.HookID != "hook-a" {
			t.Errorf("A's stats %+v, OnConflict got %+v: want 1 conflict, hook-a's commit held by hook-b",
				s, got)
		}
	} else if s.Replayed != 1 || s.Conflicts != 0 || len(got) != 0 {
		t.Errorf("A's stats %+v, OnConflict got %+v: want hook-a's commit replayed, no conflict", s, got)
	}
	nodes := []*fleetstore.Store{f.B, f.A}
	if end == "released, A closed" {
		nodes = nodes[:1]
	}
	for i, st := range nodes {
		redelivery := claim("hook-c", "node-c", time.Minute)
		res, err := st.Hit(ctx, nil, &redelivery)
		if err != nil || res.Outcome != fleetstore.Duplicate || res.HookID != want {
			t.Errorf("a claim-only Hit on E at %s after hook-b's claim was %s: %+v %v, "+
				"want Duplicate naming %s", []string{"B", "A"}[i], end, res, err, want)
		}
	}
}

// WaitFor polls cond every ms for up to d (a wide bound for a loaded
// machine) and reports whether it came true.
func WaitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
	return true
}
