package main

import (
	"encoding/json"
	"net"
	"strings"
	"testing"
)

// TestBenchFallback: -fallback N runs a degraded node against a refused
// address: every Hit is decided locally, every OK committed into the
// outbox, no call fails, and the report counts both.
func TestBenchFallback(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // a port nothing listens on: refused
	code, stdout, stderr := runArgs(t, "bench", "-fallback", "3", "-d", "300ms", "-c", "2", "-ping", "0", "-json", "redis://"+addr)
	if code != exitOK {
		t.Fatalf("exit status %d, stderr %q", code, stderr)
	}
	var rep benchReport
	if err := json.NewDecoder(strings.NewReader(stdout)).Decode(&rep); err != nil {
		t.Fatalf("stdout is not a report: %v\n%s", err, stdout)
	}
	f := rep.Fallback
	if f == nil || rep.Hooks == 0 || f.LocalDecisions != rep.Hooks || f.Queued < rep.Commits || rep.Commits == 0 || !f.Degraded {
		t.Fatalf("hooks %d, commits %d, fallback %+v: want every hit local, every commit queued, degraded", rep.Hooks, rep.Commits, f)
	}
	for _, errs := range []map[string]uint64{rep.HitErrors, rep.CommitErrors} {
		for class, n := range errs {
			if n != 0 {
				t.Errorf("%d %s errors with the fallback on: %v", n, class, rep.ErrorSamples)
			}
		}
	}
	code, stdout, _ = runArgs(t, "bench", "-fallback", "3", "-d", "100ms", "-c", "1", "-ping", "0", "redis://"+addr)
	if code != exitOK || !strings.Contains(stdout, "fallback     local decisions") || !strings.Contains(stdout, "commits queued") {
		t.Errorf("text report without the fallback line (exit %d):\n%s", code, stdout)
	}
	if code, _, stderr := runArgs(t, "bench", "-fallback", "-1", "-d", "10ms"); code != exitUsage || !strings.Contains(stderr, "-fallback") {
		t.Errorf("-fallback -1: exit %d, stderr %q, want a usage error naming -fallback", code, stderr)
	}
}
