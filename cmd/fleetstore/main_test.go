package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func runArgs(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(t.Context(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// Bad input is one line on stderr and exit status 2 (issue 2, "Bad input").
func TestBenchBadURL(t *testing.T) {
	tests := []struct {
		name string
		give string
		want string // in the line
	}{
		{"malformed", "memory://%zz", "invalid url"},
		{"no scheme", "::bad", "invalid url"},
		{"unknown scheme", "nosuch://host:1", "unknown scheme"},
		{"unknown parameter", "memory://?bogus=1", "bogus"},
		{"bad timeout", "memory://?timeout=soon", "timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runArgs(t, "bench", "-d", "10ms", "-ping", "0", tt.give)
			if code != exitUsage {
				t.Errorf("exit status %d, want %d", code, exitUsage)
			}
			checkOneLine(t, stderr, tt.want)
			if stdout != "" {
				t.Errorf("stdout %q, want nothing", stdout)
			}
		})
	}
}

func TestBenchURLFromEnv(t *testing.T) {
	t.Setenv("FLEETSTORE_URL", "nosuch://host:1")
	code, _, stderr := runArgs(t, "bench", "-d", "10ms")
	if code != exitUsage {
		t.Errorf("exit status %d, want %d", code, exitUsage)
	}
	checkOneLine(t, stderr, `unknown scheme "nosuch"`)
}

func TestBenchBadArgs(t *testing.T) {
	tests := []struct {
		name string
		give []string
		want string
	}{
		{"two URLs", []string{"memory://", "memory://b"}, "at most one URL"},
		{"dup above 1", []string{"-dup", "1.5"}, "-dup"},
		{"zero concurrency", []string{"-c", "0"}, "-c"},
		{"kinds 0", []string{"-kinds", "0"}, "-kinds"},
		{"kinds over MaxCharges", []string{"-kinds", "5"}, "-kinds"},
		{"skew 1", []string{"-skew", "1"}, "-skew"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runArgs(t, append([]string{"bench", "-d", "10ms"}, tt.give...)...)
			if code != exitUsage {
				t.Errorf("exit status %d, want %d", code, exitUsage)
			}
			checkOneLine(t, stderr, tt.want)
		})
	}
}

func TestUnknownCommand(t *testing.T) {
	code, _, stderr := runArgs(t, "bogus")
	if code != exitUsage {
		t.Errorf("exit status %d, want %d", code, exitUsage)
	}
	checkOneLine(t, stderr, "unknown command")
	if code, _, _ := runArgs(t); code != exitUsage {
		t.Errorf("no command: exit status %d, want %d", code, exitUsage)
	}
}

func checkOneLine(t *testing.T, stderr, want string) {
	t.Helper()
	if strings.Count(stderr, "\n") != 1 || !strings.HasSuffix(stderr, "\n") {
		t.Errorf("stderr is not one line: %q", stderr)
	}
	if !strings.Contains(stderr, want) {
		t.Errorf("stderr %q does not contain %q", stderr, want)
	}
}

// A short run on the memory driver prints one JSON object with OK hooks;
// flags may follow the URL.
func TestBenchJSON(t *testing.T) {
	code, stdout, stderr := runArgs(t, "bench", "-d", "300ms", "-c", "4", "-ping", "50ms", "memory://", "-json", "-kinds", "3")
	if code != exitOK {
		t.Fatalf("exit status %d, stderr %q", code, stderr)
	}
	if stderr != "" {
		t.Errorf("stderr %q, want nothing (no progress line with -json)", stderr)
	}
	var rep benchReport
	dec := json.NewDecoder(strings.NewReader(stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("stdout is not a report: %v\n%s", err, stdout)
	}
	if dec.More() {
		t.Errorf("stdout has more than one JSON value:\n%s", stdout)
	}
	if rep.Outcomes["ok"] == 0 || rep.Hooks == 0 || rep.Commits == 0 {
		t.Errorf("hooks %d, ok %d, commits %d: want all nonzero", rep.Hooks, rep.Outcomes["ok"], rep.Commits)
	}
	if rep.Hit.Count == 0 || rep.Hit.P50 <= 0 || rep.Hit.Max < rep.Hit.P50 {
		t.Errorf("hit latency %+v: want samples with p50 ≤ max", rep.Hit)
	}
	if rep.Ping == nil || rep.Ping.Latency.Count == 0 {
		t.Errorf("ping %+v: want a baseline", rep.Ping)
	}
	for _, errs := range []map[string]uint64{rep.HitErrors, rep.CommitErrors} {
		for class, n := range errs {
			if n != 0 {
				t.Errorf("%d %s errors on memory://: %v", n, class, rep.ErrorSamples)
			}
		}
	}
	if want := []string{"hooks", "bytes", "k3"}; strings.Join(rep.Kinds, ",") != strings.Join(want, ",") {
		t.Errorf("kinds %v, want %v", rep.Kinds, want)
	}
}

// The text report names every figure the issue asks for.
func TestBenchText(t *testing.T) {
	code, stdout, stderr := runArgs(t, "bench", "-d", "200ms", "-c", "2", "-ping", "20ms", "-dup", "0.5", "memory://")
	if code != exitOK {
		t.Fatalf("exit status %d, stderr %q", code, stderr)
	}
	for _, want := range []string{"hooks/s", "p50", "p99.9", "max", "ping (c=1)", "ok ", "duplicate ", "rate_limited ", "errors"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("report lacks %q:\n%s", want, stdout)
		}
	}
}

func TestBenchBadFlag(t *testing.T) {
	for _, give := range [][]string{{"-d", "soon"}, {"-nosuch"}} {
		code, _, stderr := runArgs(t, append([]string{"bench"}, give...)...)
		if code != exitUsage {
			t.Errorf("%q: exit status %d, want %d", give, code, exitUsage)
		}
		checkOneLine(t, stderr, give[0])
	}
	code, stdout, _ := runArgs(t, "bench", "-h")
	if code != exitOK || !strings.Contains(stdout, "-dup") {
		t.Errorf("bench -h: exit status %d, usage %q", code, stdout)
	}
}
