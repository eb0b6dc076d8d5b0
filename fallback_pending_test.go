package fleetstore_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/drivers/memory"
	"github.com/fleetstore/fleetstore/internal/testing/degradedtest"
)

// TestFallbackReplayMeetsPending: a replayed commit that meets another
// hook's pending claim waits until that claim is committed (a conflict),
// released or expired (the commit lands), as degradedtest.ReplayMeetsPending
// says: on the memory driver, A's path black-holed (every call waits for
// its budget), hook-b's claim expired by the shared store's injected
// clock. faults.TestReplayMeetsPending runs it on real servers.
func TestFallbackReplayMeetsPending(t *testing.T) {
	t.Parallel()
	for _, end := range degradedtest.Ends {
		t.Run(end, func(t *testing.T) {
			t.Parallel()
			var now atomic.Int64 // µs; the shared store's clock
			now.Store(time.Now().UnixMicro())
			d := &flakyDriver{mem: memory.New(func() int64 { return now.Load() })}
			conflicts := &degradedtest.Conflicts{}
			a := openOnFlaky(t, d, fmt.Sprintf("pending-%d", flakySeq.Add(1)),
				fleetstore.Fallback{OnConflict: conflicts.Add})
			// The shared clock stands still: hook-b's claim is pending
			// until Expire, and A asks again every 100ms (its RetryAfter).
			const pendingTTL = 100 * time.Millisecond
			degradedtest.ReplayMeetsPending(t, &degradedtest.Fleet{A: a.Store, B: a.shared,
				Cut: func() { d.set(silent) }, Back: func() { d.set(healthy) },
				PendingTTL: pendingTTL,
				Expire:     func() { now.Add((pendingTTL + time.Millisecond).Microseconds()) },
				Conflicts:  conflicts}, end)
		})
	}
}

// TestFallbackReplayClaimFreed: a replayed Commit that met another hook's
// claim (ErrClaimLost), which is gone by the time the replay asks what it
// is (released or expired in between), takes the claim with a claim-only
// Hit under its own hook_id and commits it in the same budget: replayed,
// no conflict, and another hook's Hit is then a Duplicate naming it, not
// Pending (a claim taken and left uncommitted).
func TestFallbackReplayClaimFreed(t *testing.T) {
	t.Parallel()
	st := openFlaky(t, fleetstore.Fallback{})
	ctx := context.Background()
	st.d.set(refused)
	mine := hookClaim("evt-1", "h-here")
	if err := st.Commit(ctx, mine); err != nil {
		t.Fatal(err)
	}
	var lost atomic.Int64
	loseOnce := func(driver.Claim) error {
		if lost.Add(1) == 1 {
			return &driver.ClaimLostError{Holder: "h-gone"}
		}
		return nil
	}
	st.d.commitErr.Store(&loseOnce)
	hits := st.d.hits.Load()
	st.d.set(healthy)
	s := recovered(t, st)
	if s.Replayed != 1 || s.Conflicts != 0 {
		t.Errorf("stats %+v, want 1 replayed, no conflict", s)
	}
	if n := st.d.hits.Load() - hits; n != 1 {
		t.Errorf("%d Hits reached the shared store during the replay, want 1 (the claim-only Hit)", n)
	}
	other := hookClaim("evt-1", "h-other")
	if res, err := st.shared.Hit(ctx, nil, &other); err != nil || res.Outcome != fleetstore.Duplicate || res.HookID != "h-here" {
		t.Errorf("another hook after the replay: %+v %v, want Duplicate naming h-here", res, err)
	}
}
