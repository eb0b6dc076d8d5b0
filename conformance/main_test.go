package conformance_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/fleetstore/fleetstore/conformance"
	"github.com/fleetstore/fleetstore/drivers/memory"
)

// TestRunMain: the driver author's command runs the clauses given, prints
// a line for each, and says by its status whether one failed.
func TestRunMain(t *testing.T) {
	var out, errs bytes.Buffer
	cfg := conformance.Config{Driver: memory.New(nil)}
	if code := conformance.RunMain(cfg, []string{"-only", "g1,C7", "mine://x"}, &out, &errs); code != 0 {
		t.Fatalf("exit %d, stdout %s, stderr %s", code, out.String(), errs.String())
	}
	if !strings.Contains(out.String(), "PASS  G1") || !strings.Contains(out.String(), "PASS  C7") ||
		!strings.Contains(out.String(), "2 passed, 0 failed") {
		t.Fatalf("output: %s", out.String())
	}
	out.Reset()
	broken := conformance.Config{Driver: stuckDriver{mem: memory.New(nil)}}
	if code := conformance.RunMain(broken, []string{"-only", "G1", "mine://x"}, &out, &errs); code != 1 ||
		!strings.Contains(out.String(), "FAIL  G1") {
		t.Fatalf("a failing driver: exit %d, output %s; want 1 and FAIL G1", code, out.String())
	}
	if code := conformance.RunMain(cfg, []string{"-only", "Z9", "mine://x"}, &out, &errs); code != 2 {
		t.Fatalf("an unknown clause: exit %d, want 2", code)
	}
}
