package degraded

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/internal/checked"
	"github.com/fleetstore/fleetstore/internal/memstore"
	"github.com/fleetstore/fleetstore/observe"
)

// newTestConn is a degraded mode around a memory store of its own as the
// shared store, which it returns too.
func newTestConn(t *testing.T, rules Rules) (*Conn, driver.Conn) {
	t.Helper()
	shared, err := memstore.New(memstore.Monotonic).Open(driver.Config{
		URL: &url.URL{Scheme: "memory", Host: "shared"}, KeyPrefix: "shared",
		Timeout: time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	rules.Share = OfNodes(1)
	if rules.OutboxSize == 0 {
		rules.OutboxSize = 16
	}
	rules.LocalClaims, rules.RecentCommits = 64, 16
	if rules.Logger == nil {
		rules.Logger = zap.NewNop()
	}
	rules.Timeout = time.Second
	fb, err := New(checked.New(shared), rules)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fb.Close() })
	return fb, shared
}

func testClaim(key, hook string) driver.Claim {
	return driver.Claim{Tenant: "t", SourceID: "s", Key: key, HookID: hook, TTL: time.Hour,
		PendingTTL: time.Minute}
}

// TestReplayBatch: of one batch, a commit whose TTL ran out in the queue
// is not sent (Expired), one the shared store takes is Replayed and
// enters the recent commits, one that meets another hook's committed
// claim is a conflict handed to OnConflict, and one that meets another
// hook's pending claim is parked until that claim's pending time is up.
// Every one but the parked leaves the outbox.
func TestReplayBatch(t *testing.T) {
	var conflicts []string
	fb, shared := newTestConn(t, Rules{OnConflict: func(c driver.Claim, holder string,
		_ time.Time) {
		conflicts = append(conflicts, c.Key+" held by "+holder)
	}})
	ctx := context.Background()
	heldByOther(t, shared)
	now := time.Now()
	batch := []queued{
		{claim: testClaim("expired", "mine"), at: now.Add(-2 * time.Hour), seq: 1},
		{claim: testClaim("fresh", "mine"), at: now, seq: 2},
		{claim: testClaim("committed", "mine"), at: now, seq: 3},
		{claim: testClaim("pending", "mine"), at: now, seq: 4},
	}
	res := fb.replayer.replayBatch(ctx, batch)
	if len(res.back) != 0 || res.cause != nil {
		t.Errorf("kept %d commits, cause %v; want none", len(res.back), res.cause)
	}
	if len(res.parked) != 1 || res.parked[0].q.claim.Key != "pending" ||
		!res.parked[0].due.After(now) {
		t.Errorf("parked %+v, want the commit that met a pending claim, due later", res.parked)
	}
	if len(res.acks) != 3 || !res.progress() {
		t.Errorf("acks %v, progress %v; want the 3 settled, progress", res.acks, res.progress())
	}
	st := fb.Stats()
	if st.Expired != 1 || st.Replayed != 1 || st.Conflicts != 1 {
		t.Errorf("stats %+v, want 1 expired, 1 replayed, 1 conflict", st)
	}
	if len(conflicts) != 1 || conflicts[0] != "committed held by other" {
		t.Errorf("OnConflict told %v, want the committed claim held by other", conflicts)
	}
	fresh := testClaim("fresh", "mine")
	if hook, _, ok := fb.local.recent.committer(&fresh); !ok || hook != "mine" {
		t.Errorf("recent commits: %q %v, want the replayed commit's hook", hook, ok)
	}
	if res, err := shared.Hit(ctx, nil, &fresh); err != nil || res.Outcome != driver.Duplicate {
		t.Errorf("the replayed commit in the shared store: %+v %v, want Duplicate", res, err)
	}
}

// failingCommit is a shared store whose Commit fails as an unreachable
// server's does.
type failingCommit struct{ Shared }

var errRefused = errors.New("dial tcp 127.0.0.1:1: connection refused")

func (failingCommit) Commit(context.Context, []driver.Claim) ([]error, error) {
	return nil, errRefused
}

// TestReplayBatchOutage: a batch whose Commit fails for an outage is kept
// whole, with no progress, and its cause is the error as the Store
// returns it (ErrUnavailable, the driver's error kept).
func TestReplayBatchOutage(t *testing.T) {
	fb, _ := newTestConn(t, Rules{})
	fb.shared = failingCommit{fb.shared}
	batch := []queued{{claim: testClaim("a", "mine"), at: time.Now()},
		{claim: testClaim("b", "mine"), at: time.Now()}}
	res := fb.replayer.replayBatch(context.Background(), batch)
	if len(res.back) != 2 || res.progress() {
		t.Errorf("kept %d, progress %v; want both kept, no progress", len(res.back), res.progress())
	}
	if !errors.Is(res.cause, driver.ErrUnavailable) || !errors.Is(res.cause, errRefused) {
		t.Errorf("cause %v, want ErrUnavailable wrapping the driver's error", res.cause)
	}
}

// TestReplayObserved: a replayed batch is reported to the observer as one
// event whose failures are the commits its replay failed, not those it
// settled: a conflict or a commit parked behind another hook's pending
// claim is an outcome of the outage, and a batch of them with the rest
// replayed is no failed call.
func TestReplayObserved(t *testing.T) {
	var events []observe.Event
	fb, shared := newTestConn(t, Rules{Observe: func(_ context.Context, e observe.Event) {
		events = append(events, e)
	}})
	ctx := context.Background()
	heldByOther(t, shared)
	now := time.Now()
	fb.replayer.replayBatch(ctx, []queued{
		{claim: testClaim("fresh", "mine"), at: now},
		{claim: testClaim("committed", "mine"), at: now},
		{claim: testClaim("pending", "mine"), at: now},
	})
	if len(events) != 1 {
		t.Fatalf("%d events for one batch, want 1", len(events))
	}
	if e := events[0]; e.Op != observe.OpReplay || e.Claims != 3 || e.Failed != 0 ||
		e.Class != observe.ClassNone || e.Duration <= 0 {
		t.Errorf("event %+v, want a replay of 3 claims, none failed, no error class", e)
	}

	events = nil
	fb.shared = failingCommit{fb.shared}
	fb.replayer.replayBatch(ctx, []queued{{claim: testClaim("a", "mine"), at: now},
		{claim: testClaim("b", "mine"), at: now}})
	if len(events) != 1 || events[0].Failed != 2 || events[0].Class != observe.ClassUnavailable {
		t.Errorf("events %+v, want one replay of 2 failed, unavailable", events)
	}
}

// heldByOther puts two claims of hook "other" in the shared store: key
// "committed", committed, and key "pending", pending, for a replay of this
// node's commits of the same keys to meet.
func heldByOther(t *testing.T, shared driver.Conn) {
	t.Helper()
	ctx := context.Background()
	committed := testClaim("committed", "other")
	if errs, err := shared.Commit(ctx, []driver.Claim{committed}); err != nil || errs[0] != nil {
		t.Fatal(errs, err)
	}
	pending := testClaim("pending", "other")
	if res, err := shared.Hit(ctx, nil, &pending); err != nil || res.Outcome != driver.OK {
		t.Fatal(res, err)
	}
}
