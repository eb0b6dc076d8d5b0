package fleetstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/observe"
)

// recovered waits for st to decide shared again with an empty outbox.
func recovered(t *testing.T, st *flakyStore) observe.Stats {
	t.Helper()
	var s observe.Stats
	if !waitFor(5*time.Second, func() bool { s = st.FallbackStats(); return !s.Degraded && s.Outbox == 0 }) {
		t.Fatalf("not recovered 5s after the store was back: %+v", s)
	}
	return s
}

// TestFallbackOutbox: nothing committed is lost (CONTRACT §8). A hook
// decided locally and committed during the outage is committed locally (a
// retry here is a Duplicate) and queued; so is a hook whose claim was
// taken on the shared store before the outage. When the store is back
// the queue is replayed: another node then sees both as Duplicates, the
// outbox is empty and the local store has forgotten them.
func TestFallbackOutbox(t *testing.T) {
	t.Parallel()
	st := openFlaky(t, fleetstore.Fallback{})
	ctx := context.Background()
	before := hookClaim("before", "h-before") // claimed on the shared store, committed in the outage
	if res, err := st.Hit(ctx, nil, &before); err != nil || res.Local {
		t.Fatalf("healthy hit: %+v %v", res, err)
	}
	st.d.set(silent)
	during := hookClaim("during", "h-during")
	if res, err := st.Hit(ctx, []fleetstore.Charge{bigCharge}, &during); err != nil || !res.Local || res.Outcome != fleetstore.OK {
		t.Fatalf("degraded hit: %+v %v", res, err)
	}
	if err := st.Commit(ctx, during, before); err != nil {
		t.Fatalf("degraded commit: %v, want nil (queued)", err)
	}
	if s := st.FallbackStats(); s.Outbox != 2 || s.Queued != 2 {
		t.Fatalf("stats %+v, want 2 queued", s)
	}
	for _, c := range []fleetstore.Claim{during, before} {
		retry := c
		retry.HookID = "h-retry"
		if res, _ := st.Hit(ctx, []fleetstore.Charge{bigCharge}, &retry); res.Outcome != fleetstore.Duplicate || res.HookID != c.HookID || !res.Local {
			t.Errorf("a retry of %s at this node during the outage: %+v, want a local Duplicate of %s", c.Key, res, c.HookID)
		}
	}
	st.d.set(healthy)
	s := recovered(t, st)
	if s.Replayed != 2 || s.Conflicts != 0 {
		t.Errorf("stats %+v, want 2 replayed", s)
	}
	for _, c := range []fleetstore.Claim{during, before} {
		retry := c
		retry.HookID = "h-elsewhere"
		if res, err := st.shared.Hit(ctx, nil, &retry); err != nil || res.Outcome != fleetstore.Duplicate || res.HookID != c.HookID {
			t.Errorf("a retry of %s at another node after the outage: %+v %v, want Duplicate of %s", c.Key, res, err, c.HookID)
		}
	}
	if !waitFor(5*time.Second, func() bool { return fleetstore.LocalClaims(st.Store) == 0 }) {
		t.Errorf("the local store holds %d claims after the replay, want none: what the shared store keeps is forgotten locally", fleetstore.LocalClaims(st.Store))
	}
}

// TestFallbackCommitFailsAfterHit: a Commit on a healthy store that fails
// for an outage (the claim was taken on the shared store, which then went
// away) is queued and its Commit is nil; so is each claim of a batch that
// failed alone for an outage (one shard down), while the others settle.
func TestFallbackCommitFailsAfterHit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("whole call", func(t *testing.T) {
		t.Parallel()
		st := openFlaky(t, fleetstore.Fallback{})
		c := hookClaim("k", "h-1")
		if res, err := st.Hit(ctx, nil, &c); err != nil || res.Local {
			t.Fatalf("hit: %+v %v", res, err)
		}
		st.d.set(refused)
		if err := st.Commit(ctx, c); err != nil {
			t.Fatalf("commit that met the outage: %v, want nil (queued)", err)
		}
		if s := st.FallbackStats(); !s.Degraded || s.Outbox != 1 {
			t.Fatalf("stats %+v, want degraded, 1 queued", s)
		}
		st.d.set(healthy)
		recovered(t, st)
		other := hookClaim("k", "h-2")
		if res, _ := st.shared.Hit(ctx, nil, &other); res.Outcome != fleetstore.Duplicate || res.HookID != "h-1" {
			t.Errorf("after the outage: %+v, want Duplicate of h-1", res)
		}
	})
	t.Run("one claim of a batch", func(t *testing.T) {
		t.Parallel()
		st := openFlaky(t, fleetstore.Fallback{})
		failOnce := func(c driver.Claim) error {
			if c.Key == "down" {
				return fmt.Errorf("shard: %w", fleetstore.ErrTimeout)
			}
			return nil
		}
		st.d.commitErr.Store(&failOnce)
		a, b := hookClaim("up", "h-1"), hookClaim("down", "h-2")
		if err := st.Commit(ctx, a, b); err != nil {
			t.Fatalf("commit: %v, want nil (the failed claim queued)", err)
		}
		if s := st.FallbackStats(); s.Outbox != 1 || s.Queued != 1 || !s.Degraded {
			t.Fatalf("stats %+v, want the one failed claim queued", s)
		}
		st.d.commitErr.Store(nil)
		recovered(t, st)
		for _, c := range []fleetstore.Claim{a, b} {
			other := hookClaim(c.Key, "h-9")
			if res, _ := st.shared.Hit(ctx, nil, &other); res.Outcome != fleetstore.Duplicate || res.HookID != c.HookID {
				t.Errorf("%s: %+v, want Duplicate of %s", c.Key, res, c.HookID)
			}
		}
	})
}

// TestFallbackOutboxBound: the outbox holds OutboxSize commits; the next
// ones are dropped, counted, logged once, not committed locally, and
// their Commit fails with the outage's error naming each claim. A call
// never blocks on a full outbox.
func TestFallbackOutboxBound(t *testing.T) {
	t.Parallel()
	st := openFlaky(t, fleetstore.Fallback{OutboxSize: 3})
	st.d.set(refused)
	ctx := context.Background()
	var claims []fleetstore.Claim
	for i := range 5 {
		claims = append(claims, hookClaim(fmt.Sprintf("k-%d", i), "h"))
	}
	err := st.Commit(ctx, claims...)
	var ce *fleetstore.ClaimError
	if !errors.Is(err, fleetstore.ErrUnavailable) || !errors.As(err, &ce) || ce.Index != 3 || !strings.Contains(err.Error(), "outbox full") {
		t.Fatalf("commit of 5 into an outbox of 3: %v, want ClaimErrors for claims 3 and 4 (ErrUnavailable, outbox full)", err)
	}
	if n := countJoined(err); n != 2 {
		t.Errorf("%d claim errors, want 2", n)
	}
	for range 100 {
		if err := st.Commit(ctx, hookClaim("more", "h")); err == nil {
			t.Fatal("commit into a full outbox returned nil")
		}
	}
	if s := st.FallbackStats(); s.Outbox != 3 || s.Queued != 3 || s.Dropped != 102 {
		t.Errorf("stats %+v, want outbox 3, queued 3, dropped 102", s)
	}
	if n := logCount(st.logs, "outbox full"); n != 1 {
		t.Errorf("%d 'outbox full' lines, want 1", n)
	}
	retry := hookClaim("k-4", "h-2")
	if res, _ := st.Hit(ctx, nil, &retry); res.Outcome != fleetstore.OK {
		t.Errorf("a dropped commit was committed locally: retry %+v, want OK", res)
	}
}

// countJoined counts the errors errors.Join joined in err.
func countJoined(err error) int {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return len(j.Unwrap())
	}
	if err == nil {
		return 0
	}
	return 1
}

// TestFallbackReplayConflict: a replayed commit that meets another hook's
// claim (the outage let the event in twice) is counted, logged once with
// the claim's identity and handed to OnConflict with the holder; the
// outbox still empties.
func TestFallbackReplayConflict(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []fleetstore.Conflict
	st := openFlaky(t, fleetstore.Fallback{OnConflict: func(c fleetstore.Conflict) {
		mu.Lock()
		got = append(got, c)
		mu.Unlock()
	}})
	ctx := context.Background()
	st.d.set(refused)
	mine := hookClaim("evt-1", "h-here")
	if res, _ := st.Hit(ctx, nil, &mine); !res.Local || res.Outcome != fleetstore.OK {
		t.Fatalf("local hit: %+v", res)
	}
	if err := st.Commit(ctx, mine); err != nil {
		t.Fatal(err)
	}
	// Meanwhile the provider's retry reached a node whose store worked.
	theirs := hookClaim("evt-1", "h-there")
	if err := st.shared.Commit(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	st.d.set(healthy)
	s := recovered(t, st)
	if s.Conflicts != 1 || s.Replayed != 0 {
		t.Errorf("stats %+v, want 1 conflict", s)
	}
	mu.Lock()
	if len(got) != 1 || got[0].Holder != "h-there" || got[0].Claim.HookID != "h-here" || got[0].Claim.Key != "evt-1" || got[0].QueuedAt.IsZero() {
		t.Errorf("OnConflict got %+v, want evt-1 of h-here held by h-there", got)
	}
	mu.Unlock()
	if n := logCount(st.logs, "met another hook's claim"); n != 1 {
		t.Errorf("%d conflict lines, want 1", n)
	}
	for _, e := range st.logs.All() {
		if strings.Contains(e.Message, "met another") {
			f := e.ContextMap()
			if f["key"] != "evt-1" || f["hook_id"] != "h-here" || f["holder"] != "h-there" || f["tenant"] != "acme" {
				t.Errorf("conflict line fields %v", f)
			}
		}
	}
}

// TestFallbackFlappingLogsBounded: a store that flaps logs once per state
// change, and its replay conflicts up to the conflict log's burst over the
// Store's life, not per outage (CONTRACT §8): 4 outages of 30 conflicts
// each log 4 "out" lines, 4 "back" lines, 10 conflict lines and one line
// saying the rest are counted; Stats counts all 120. A minute later (the
// Store's injected clock) one more conflict is logged, naming how many
// were not.
func TestFallbackFlappingLogsBounded(t *testing.T) {
	t.Parallel()
	var conflicts atomic.Int64
	st := openFlaky(t, fleetstore.Fallback{OnConflict: func(fleetstore.Conflict) { conflicts.Add(1) }})
	base := time.Now()
	var offset atomic.Int64
	fleetstore.SetNow(st.Store, func() time.Time { return base.Add(time.Duration(offset.Load())) })
	ctx := context.Background()
	outage := func(n, perOutage int) {
		t.Helper()
		st.d.set(refused)
		var mine, theirs []fleetstore.Claim
		for i := range perOutage {
			key := fmt.Sprintf("evt-%d-%d", n, i)
			mine, theirs = append(mine, hookClaim(key, "h-here")), append(theirs, hookClaim(key, "h-there"))
		}
		if err := st.Commit(ctx, mine...); err != nil {
			t.Fatal(err)
		}
		if err := st.shared.Commit(ctx, theirs...); err != nil {
			t.Fatal(err)
		}
		st.d.set(healthy)
		recovered(t, st)
	}
	const outages, perOutage = 4, 30
	for n := range outages {
		outage(n, perOutage)
	}
	if s := st.FallbackStats(); s.Conflicts != outages*perOutage || conflicts.Load() != outages*perOutage || s.Outages != outages {
		t.Errorf("stats %+v, OnConflict %d: want %d outages, %d conflicts counted and handed over",
			s, conflicts.Load(), outages, outages*perOutage)
	}
	for _, c := range []struct {
		msg  string
		want int
	}{
		{"shared store out", outages}, {"shared store back", outages},
		{"met another hook's claim", fleetstore.ConflictLogBurst}, {"further replay conflicts", 1},
	} {
		if n := logCount(st.logs, c.msg); n != c.want {
			t.Errorf("%d %q lines, want %d", n, c.msg, c.want)
		}
	}
	if n, most := st.logs.Len(), 2*outages+fleetstore.ConflictLogBurst+1; n > most {
		t.Errorf("%d log lines for %d outages, want at most %d", n, outages, most)
	}

	offset.Store(int64(time.Minute))
	outage(outages, 1)
	lines := st.logs.FilterMessageSnippet("met another hook's claim").All()
	if len(lines) != fleetstore.ConflictLogBurst+1 {
		t.Fatalf("%d conflict lines a minute later, want one more", len(lines))
	}
	notLogged := uint64(outages*perOutage - fleetstore.ConflictLogBurst)
	if got := lines[len(lines)-1].ContextMap()["not_logged"]; got != notLogged {
		t.Errorf("the conflict line a minute later says not_logged=%v, want %d", got, notLogged)
	}
}

// TestFallbackReplayTTL: a replayed commit keeps the expiry its Commit
// gave it (TTL less the time queued); one whose TTL ran out in the queue
// is not sent (Stats.Expired).
func TestFallbackReplayTTL(t *testing.T) {
	t.Parallel()
	st := openFlaky(t, fleetstore.Fallback{})
	ctx := context.Background()
	st.d.set(refused)
	long := hookClaim("long", "h-1")
	long.TTL = 10 * time.Second
	short := hookClaim("short", "h-2")
	short.TTL = 50 * time.Millisecond
	if err := st.Commit(ctx, long, short); err != nil {
		t.Fatal(err)
	}
	queued := time.Now()
	time.Sleep(400 * time.Millisecond)
	st.d.set(healthy)
	s := recovered(t, st)
	if s.Replayed != 1 || s.Expired != 1 {
		t.Errorf("stats %+v, want 1 replayed, 1 expired", s)
	}
	recs, _ := st.d.mem.Records(context.Background(), "fleetstore", "acme")
	if len(recs) != 1 {
		t.Fatalf("shared records %+v, want the one long claim", recs)
	}
	if max := 10*time.Second - 400*time.Millisecond; recs[0].TTL > max || recs[0].TTL < 10*time.Second-time.Since(queued)-time.Second {
		t.Errorf("replayed claim's TTL %v, want at most %v (10s less the time queued)", recs[0].TTL, max)
	}
}

// TestFallbackRelease: a Release during an outage releases locally (a
// retry at this node may claim the key again) and says nothing of the
// shared store, whose pending claim expires by its PendingTTL.
func TestFallbackRelease(t *testing.T) {
	t.Parallel()
	st := openFlaky(t, fleetstore.Fallback{})
	ctx := context.Background()
	st.d.set(refused)
	c := hookClaim("k", "h-1")
	if res, _ := st.Hit(ctx, nil, &c); !res.Local {
		t.Fatalf("not local: %+v", res)
	}
	if err := st.Release(ctx, c); err != nil {
		t.Fatalf("release: %v", err)
	}
	retry := hookClaim("k", "h-2")
	if res, _ := st.Hit(ctx, nil, &retry); res.Outcome != fleetstore.OK || !res.Local {
		t.Errorf("a retry after the local release: %+v, want a local OK", res)
	}
	if err := st.Commit(ctx, retry); err != nil {
		t.Fatal(err)
	}
	if err := st.Release(ctx, retry); !errors.Is(err, fleetstore.ErrAlreadyCommitted) {
		t.Errorf("release of a locally committed claim: %v, want ErrAlreadyCommitted", err)
	}
	if s := st.FallbackStats(); s.Queued != 1 {
		t.Errorf("stats %+v: a release was queued", s)
	}
}

// TestFallbackLocalClaimsCap: the local store holds at most LocalClaims
// claims (give or take one count's interval); a local Hit past the cap is
// decided on its charges alone and counted.
func TestFallbackLocalClaimsCap(t *testing.T) {
	t.Parallel()
	st := openFlaky(t, fleetstore.Fallback{LocalClaims: 100})
	ctx := context.Background()
	st.d.set(refused)
	for i := range 1000 {
		c := hookClaim(fmt.Sprintf("k-%d", i), "h")
		if res, err := st.Hit(ctx, []fleetstore.Charge{bigCharge}, &c); err != nil || res.Outcome != fleetstore.OK || !res.Local {
			t.Fatalf("hit %d: %+v %v, want a local OK", i, res, err)
		}
	}
	s := st.FallbackStats()
	if s.ClaimsDropped < 1000-100-10 || s.ClaimsDropped > 900 {
		t.Errorf("stats %+v, want about 900 claims dropped (cap 100, counted every 6)", s)
	}
}

// TestFallbackReplayRefused: a commit the shared store answers with an
// error on every replay is dropped after a few tries (counted, logged)
// instead of keeping the node degraded for ever.
func TestFallbackReplayRefused(t *testing.T) {
	t.Parallel()
	st := openFlaky(t, fleetstore.Fallback{})
	ctx := context.Background()
	st.d.set(refused)
	good, bad := hookClaim("good", "h-1"), hookClaim("bad", "h-2")
	if err := st.Commit(ctx, good, bad); err != nil {
		t.Fatal(err)
	}
	refuse := func(c driver.Claim) error {
		if c.Key == "bad" {
			return driver.ErrorReply(errors.New("ERR value is not valid"))
		}
		return nil
	}
	st.d.commitErr.Store(&refuse)
	st.d.set(healthy)
	var s observe.Stats
	if !waitFor(20*time.Second, func() bool { s = st.FallbackStats(); return !s.Degraded && s.Outbox == 0 }) {
		t.Fatalf("still degraded: %+v", s)
	}
	if s.Replayed != 1 || s.Dropped != 1 {
		t.Errorf("stats %+v, want 1 replayed, 1 dropped", s)
	}
	if n := logCount(st.logs, "refused too often"); n != 1 {
		t.Errorf("%d 'refused too often' lines, want 1", n)
	}
}

// TestFallbackReplayKeepsLocalClaims: while the breaker is open, a replay
// forgets nothing locally: a retry that reaches this node between a
// commit's replay and the breaker's closing is still a Duplicate here
// (Hits are still local), not a hook admitted twice.
func TestFallbackReplayKeepsLocalClaims(t *testing.T) {
	t.Parallel()
	st := openFlaky(t, fleetstore.Fallback{})
	ctx := context.Background()
	st.d.set(refused)
	const n = 300 // two replay batches
	for i := range n {
		if err := st.Commit(ctx, hookClaim(fmt.Sprintf("k-%d", i), "h")); err != nil {
			t.Fatal(err)
		}
	}
	gate := make(chan struct{})
	hold := func(c driver.Claim) error {
		if c.Key == fmt.Sprintf("k-%d", n-1) {
			<-gate
		}
		return nil
	}
	st.d.commitErr.Store(&hold)
	st.d.set(healthy)
	if !waitFor(5*time.Second, func() bool { return st.FallbackStats().Replayed >= 256 }) {
		close(gate)
		t.Fatalf("the first batch was not replayed: %+v", st.FallbackStats())
	}
	retry := hookClaim("k-0", "h-retry")
	res, err := st.Hit(ctx, nil, &retry)
	close(gate)
	if err != nil || !res.Local || res.Outcome != fleetstore.Duplicate || res.HookID != "h" {
		t.Errorf("a retry during the replay: %+v %v, want a local Duplicate of h", res, err)
	}
	recovered(t, st)
}

// TestFallbackReplaySlowBatches: a replayed batch whose budget runs out
// after some of its claims (a driver that settles claim by claim, on a
// slow machine) is progress, not an outage: the replay goes on at once in
// smaller batches instead of waiting for the probe, and every commit gets
// there.
func TestFallbackReplaySlowBatches(t *testing.T) {
	t.Parallel()
	st := openFlaky(t, fleetstore.Fallback{})
	ctx := context.Background()
	st.d.set(refused)
	const n = 1000
	for i := range n {
		if err := st.Commit(ctx, hookClaim(fmt.Sprintf("k-%d", i), "h")); err != nil {
			t.Fatal(err)
		}
	}
	st.d.settleAtMost.Store(20)
	time.Sleep(1500 * time.Millisecond) // the probe's backoff is near its 1s ceiling
	pings := st.d.pings.Load()
	st.d.set(healthy)
	s := recovered(t, st)
	if s.Replayed != n {
		t.Errorf("stats %+v, want %d replayed", s, n)
	}
	// One probe found the store back; a replay that waited for a probe
	// after each short batch would need tens of them.
	if p := st.d.pings.Load() - pings; p > 3 {
		t.Errorf("%d probes during the replay of %d commits 20 a call, want 1–3 (no probe wait between batches)", p, n)
	}
}
