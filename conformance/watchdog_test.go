package conformance_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore/conformance"
	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/drivers/memory"
)

// stuckDriver is the memory driver with a Hit that ignores its context:
// it blocks until release is closed (hang), or fails at once with the
// same error every time (fail).
type stuckDriver struct {
	mem     driver.Driver
	hang    bool
	release chan struct{}
}

func (d stuckDriver) Open(cfg driver.Config) (driver.Conn, error) {
	c, err := d.mem.Open(cfg)
	if err != nil {
		return nil, err
	}
	return stuckConn{Conn: c, d: d}, nil
}

type stuckConn struct {
	driver.Conn
	d stuckDriver
}

func (c stuckConn) Hit(ctx context.Context, charges []driver.Charge, claim *driver.Claim) (driver.Result, error) {
	if c.d.hang {
		<-c.d.release
	}
	return driver.Result{}, errors.New("no answer")
}

// TestClauseWatchdog: a clause whose driver call ignores its deadline is
// reported FAIL by name once Config.ClauseTimeout has passed, with the
// stacks of the suite's goroutines, instead of hanging the run.
func TestClauseWatchdog(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	start := time.Now()
	reports, err := conformance.Check(conformance.Config{
		Driver:        stuckDriver{mem: memory.New(nil), hang: true, release: release},
		URL:           "stuck://x",
		ClauseTimeout: time.Second,
	}, []string{"G1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Fatalf("Check took %v with a clause timeout of 1s", took)
	}
	msgs := strings.Join(reports[0].Messages, "\n")
	if reports[0].Status != conformance.Fail || !strings.Contains(msgs, "G1 did not end within 1s") ||
		!strings.Contains(msgs, "conformance.") {
		t.Fatalf("hung G1: %s %s, want FAIL naming G1 with the stacks", reports[0].Status, msgs)
	}
}

// TestRepeatedMessagesCounted: the same failure from many concurrent
// calls (G4's 200) is one line with its count.
func TestRepeatedMessagesCounted(t *testing.T) {
	reports, err := conformance.Check(conformance.Config{
		Driver: stuckDriver{mem: memory.New(nil)},
		URL:    "stuck://x",
	}, []string{"G4"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := reports[0]
	seen := map[string]bool{}
	counted := false
	for _, m := range r.Messages {
		if seen[m] {
			t.Errorf("message repeated: %q", m)
		}
		seen[m] = true
		counted = counted || strings.Contains(m, "(×")
	}
	if r.Status != conformance.Fail || !counted {
		t.Fatalf("G4 on a store that fails every Hit: %s %q, want FAIL with a counted line", r.Status, r.Messages)
	}
}
