package degraded

import (
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/fleetstore/fleetstore/internal/outboxlog"
	"github.com/fleetstore/fleetstore/observe"
)

// TestRestoredOutageFigures: commits read back from the outbox's
// directory at New are queued (or dropped, past its size) within the
// outage they open, so that the "shared store back" line and
// OnStateChange's stats agree on them: of 7 on disk and room for 5, 5
// queued and replayed, 2 dropped.
func TestRestoredOutageFigures(t *testing.T) {
	dir := t.TempDir()
	disk, _, err := outboxlog.Open(dir, outboxlog.Options{Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	recs := make([]outboxlog.Record, 7)
	for i := range recs {
		recs[i] = outboxlog.Record{Claim: testClaim(string(rune('a'+i)), "mine"),
			QueuedAt: time.Now()}
	}
	if err := disk.Append(recs); err != nil {
		t.Fatal(err)
	}
	if err := disk.Close(); err != nil {
		t.Fatal(err)
	}

	core, logs := observer.New(zap.InfoLevel)
	var mu sync.Mutex
	var back *observe.Stats
	newTestConn(t, Rules{OutboxDir: dir, OutboxSize: 5, Logger: zap.New(core),
		OnStateChange: func(degraded bool, _ error, st observe.Stats) {
			if !degraded {
				mu.Lock()
				back = &st
				mu.Unlock()
			}
		}})
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		done := back != nil
		mu.Unlock()
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the restored outbox was not replayed within 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	line := logs.FilterMessageSnippet("shared store back").All()
	if len(line) != 1 {
		t.Fatalf("%d \"shared store back\" lines, want 1", len(line))
	}
	m := line[0].ContextMap()
	if back.Queued != 5 || back.Replayed != 5 || back.Dropped != 2 {
		t.Errorf("OnStateChange's stats %+v, want 5 queued, 5 replayed, 2 dropped", *back)
	}
	for _, f := range []struct {
		name string
		want uint64
	}{{"queued", back.Queued}, {"replayed", back.Replayed}, {"dropped", back.Dropped}} {
		if m[f.name] != f.want {
			t.Errorf("the log line's %s %v, OnStateChange's %d", f.name, m[f.name], f.want)
		}
	}
}
