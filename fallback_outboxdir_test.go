package fleetstore_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/internal/outboxlog"
)

// outageOnDisk opens a Store with its outbox in a directory of its own
// (returned) on a flaky driver (returned, with the memory store's name),
// whose shared store then refuses every call.
func outageOnDisk(t *testing.T) (a *flakyStore, d *flakyDriver, name, dir string) {
	t.Helper()
	dir = t.TempDir()
	d = newFlaky()
	name = fmt.Sprintf("flaky-%d", flakySeq.Add(1))
	a = openOnFlaky(t, d, name, fleetstore.Fallback{OutboxDir: dir})
	d.set(refused)
	return a, d, name, dir
}

// TestFallbackOutboxDirReopen: commits queued in Fallback.OutboxDir survive
// Close (its last replay refused) and are replayed at the next Open of a
// Store on the directory before that Store decides shared (CONTRACT §8):
// it opens degraded, with the commits queued and committed locally (a
// retry at this node is a Duplicate), and when it says it is shared again
// (OnStateChange) its outbox is empty and every commit is in the shared
// store. The Store closed on an unreplayed outbox says they are kept.
func TestFallbackOutboxDirReopen(t *testing.T) {
	t.Parallel()
	const n = 100
	a, d, name, dir := outageOnDisk(t)
	ctx := context.Background()
	for i := range n {
		c := hookClaim(fmt.Sprintf("k-%d", i), fmt.Sprintf("h-%d", i))
		if res, err := a.Hit(ctx, []fleetstore.Charge{bigCharge}, &c); err != nil || !res.Local || res.Outcome != fleetstore.OK {
			t.Fatalf("degraded hit %d: %+v %v", i, res, err)
		}
		if err := a.Commit(ctx, c); err != nil {
			t.Fatalf("degraded commit %d: %v, want nil (queued)", i, err)
		}
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if got := logCount(a.logs, "kept in the outbox directory"); got != 1 {
		t.Errorf("%d lines saying the commits are kept, want 1", got)
	}

	var mu sync.Mutex
	var changes []fleetstore.StateChange
	b := openOnFlaky(t, d, name, fleetstore.Fallback{OutboxDir: dir, OnStateChange: func(c fleetstore.StateChange) {
		mu.Lock()
		changes = append(changes, c)
		mu.Unlock()
	}})
	if s := b.FallbackStats(); !s.Degraded || s.Outbox != n {
		t.Fatalf("stats at Open: %+v, want degraded with %d queued", s, n)
	}
	retry := hookClaim("k-7", "h-retry")
	if res, err := b.Hit(ctx, []fleetstore.Charge{bigCharge}, &retry); err != nil || res.Outcome != fleetstore.Duplicate || res.HookID != "h-7" || !res.Local {
		t.Errorf("a retry at the reopened node before the replay: %+v %v, want a local Duplicate of h-7", res, err)
	}
	d.set(healthy)
	s := recovered(t, b)
	if s.Replayed != n || s.Conflicts != 0 {
		t.Errorf("stats %+v, want %d replayed, no conflict", s, n)
	}
	if !waitFor(5*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(changes) == 2 }) {
		t.Fatalf("state changes %+v, want degraded then shared", changes)
	}
	mu.Lock()
	if sh := changes[1]; sh.Degraded || sh.Stats.Outbox != 0 || sh.Stats.Replayed != n {
		t.Errorf("decided shared with %+v, want the %d commits replayed first", sh.Stats, n)
	}
	mu.Unlock()
	for i := range n {
		other := hookClaim(fmt.Sprintf("k-%d", i), "h-elsewhere")
		if res, err := b.shared.Hit(ctx, nil, &other); err != nil || res.Outcome != fleetstore.Duplicate || res.HookID != fmt.Sprintf("h-%d", i) {
			t.Errorf("k-%d in the shared store after the reopen: %+v %v, want Duplicate of h-%d", i, res, err, i)
		}
	}
	// Acknowledged: a third Open has nothing to replay.
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	c := openOnFlaky(t, d, name, fleetstore.Fallback{OutboxDir: dir})
	if s := c.FallbackStats(); s.Degraded || s.Outbox != 0 {
		t.Errorf("stats at the third Open: %+v, want nothing queued", s)
	}
}

// TestFallbackOutboxDirRecords: what an Open reads back from the directory
// is replayed by its rules. A record the shared store already holds
// committed by the same hook (a crash between the replay's Commit and its
// acknowledgement) is replayed, no conflict; one another hook committed
// is a conflict; one whose TTL ran out by the wall clock while no process
// ran is Expired, not sent.
func TestFallbackOutboxDirRecords(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d := newFlaky()
	name := fmt.Sprintf("flaky-%d", flakySeq.Add(1))
	ctx := context.Background()
	view, err := fleetstore.OpenDriver(d.mem, "memory://"+name)
	if err != nil {
		t.Fatal(err)
	}
	defer view.Close()
	for _, c := range []fleetstore.Claim{hookClaim("again", "h-again"), hookClaim("taken", "h-other")} {
		if err := view.Commit(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	log, _, err := outboxlog.Open(dir, outboxlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	recs := []outboxlog.Record{
		{Claim: hookClaim("again", "h-again"), QueuedAt: now},
		{Claim: hookClaim("taken", "h-mine"), QueuedAt: now},
		{Claim: hookClaim("stale", "h-stale"), QueuedAt: now.Add(-2 * time.Hour)}, // TTL 1h
	}
	if err := log.Append(recs); err != nil {
		t.Fatal(err)
	}
	if err := log.Close(); err != nil {
		t.Fatal(err)
	}
	var conflicts []fleetstore.Conflict
	var mu sync.Mutex
	st := openOnFlaky(t, d, name, fleetstore.Fallback{OutboxDir: dir, OnConflict: func(c fleetstore.Conflict) {
		mu.Lock()
		conflicts = append(conflicts, c)
		mu.Unlock()
	}})
	s := recovered(t, st)
	if s.Replayed != 1 || s.Conflicts != 1 || s.Expired != 1 {
		t.Errorf("stats %+v, want 1 replayed (its own hook's), 1 conflict, 1 expired", s)
	}
	mu.Lock()
	if len(conflicts) != 1 || conflicts[0].Holder != "h-other" || conflicts[0].Claim.HookID != "h-mine" {
		t.Errorf("conflicts %+v, want h-mine's commit meeting h-other", conflicts)
	}
	mu.Unlock()
	stale := hookClaim("stale", "h-new")
	if res, err := view.Hit(ctx, nil, &stale); err != nil || res.Outcome != fleetstore.OK {
		t.Errorf("the expired record's key: %+v %v, want OK (never sent)", res, err)
	}
}

// TestFallbackOutboxDirLocked: one Store holds an outbox directory; a
// second one's Open fails naming it, and succeeds once the first closed.
func TestFallbackOutboxDirLocked(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a := openFlaky(t, fleetstore.Fallback{OutboxDir: dir})
	// The URL's parameter names the same directory.
	st, err := fleetstore.OpenDriver(newFlaky(), "memory://other?fallback_nodes=2&fallback_outbox_dir="+url.QueryEscape(dir))
	if st != nil || err == nil || !strings.Contains(err.Error(), dir) || errors.Is(err, fleetstore.ErrInvalid) {
		t.Fatalf("a second Store on %s: %v, want an error naming it (not ErrInvalid)", dir, err)
	}
	a.Close()
	st, err = fleetstore.OpenDriver(newFlaky(), "memory://other", fleetstore.WithFallback(fleetstore.Fallback{Nodes: 2, OutboxDir: dir}))
	if err != nil {
		t.Fatalf("after the first closed: %v", err)
	}
	st.Close()
}

// TestFallbackOutboxDirTornTail: a torn record at the end of the log (a
// crash in the middle of a write) is cut at Open with one log line; the
// records before it are replayed.
func TestFallbackOutboxDirTornTail(t *testing.T) {
	t.Parallel()
	a, d, name, dir := outageOnDisk(t)
	ctx := context.Background()
	for i := range 3 {
		if err := a.Commit(ctx, hookClaim(fmt.Sprintf("t-%d", i), fmt.Sprintf("h-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	a.Close()
	segs, err := filepath.Glob(filepath.Join(dir, "*"))
	if err != nil {
		t.Fatal(err)
	}
	torn := 0
	for _, p := range segs {
		if filepath.Base(p) == "LOCK" {
			continue
		}
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write([]byte{0x2a, 0x00, 0x00, 0x00, 0xde, 0xad}); err != nil { // a frame cut short
			t.Fatal(err)
		}
		f.Close()
		torn++
	}
	if torn != 1 {
		t.Fatalf("%d segment files in %v, want 1", torn, segs)
	}
	d.set(healthy)
	b := openOnFlaky(t, d, name, fleetstore.Fallback{OutboxDir: dir})
	if s := recovered(t, b); s.Replayed != 3 {
		t.Errorf("stats %+v, want the 3 records before the torn one replayed", s)
	}
	if got := logCount(b.logs, "torn or corrupt tail truncated"); got != 1 {
		t.Errorf("%d truncation lines, want 1", got)
	}
}
