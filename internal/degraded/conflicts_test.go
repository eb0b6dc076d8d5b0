package degraded

import (
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/fleetstore/fleetstore/driver"
)

// TestConflictLogBucket: a burst of ConflictLogBurst lines, then one line
// saying further ones are not logged (once), then one line a minute, which
// counts those that were not.
func TestConflictLogBucket(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	now := time.Unix(1_000_000, 0)
	l := &conflictLog{log: zap.New(core), scheme: "memory", now: func() time.Time { return now }}
	c := driver.Claim{Tenant: "t", SourceID: "s", Key: "k", HookID: "h"}
	for range ConflictLogBurst + 5 {
		l.add(&c, "other", now)
	}
	lines := logs.TakeAll()
	if len(lines) != ConflictLogBurst+1 {
		t.Fatalf("%d lines for %d conflicts at once, want the burst %d and one saying the rest are not",
			len(lines), ConflictLogBurst+5, ConflictLogBurst)
	}
	if !strings.Contains(lines[ConflictLogBurst].Message, "not logged") {
		t.Errorf("line after the burst: %q, want the one saying they are not logged",
			lines[ConflictLogBurst].Message)
	}
	now = now.Add(conflictLogEvery)
	l.add(&c, "other", now)
	l.add(&c, "other", now)
	lines = logs.TakeAll()
	if len(lines) != 1 {
		t.Fatalf("%d lines a minute later, want 1", len(lines))
	}
	if n := lines[0].ContextMap()["not_logged"]; n != uint64(5) {
		t.Errorf("not_logged %v, want the 5 held back", n)
	}
}

// TestCut: a conflict's log line names the claim by its first 64
// characters, as ClaimError does, never cutting a character in two.
func TestCut(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"short", "short"},
		{strings.Repeat("k", 100), strings.Repeat("k", 64)},
		{strings.Repeat("é", 100), strings.Repeat("é", 64)},
		{"a" + strings.Repeat("é", 70), "a" + strings.Repeat("é", 63)},
	} {
		if got := cut(tt.in); got != tt.want {
			t.Errorf("cut(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
