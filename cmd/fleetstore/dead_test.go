package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore/conformance"
	"github.com/fleetstore/fleetstore/internal/testing/testserver"
	"github.com/fleetstore/fleetstore/nettest"
)

// deadURLs are a refused address, a killed redis-server, and two refused
// Sentinels (go-redis joins their dial errors with a newline).
func deadURLs(t *testing.T) map[string]string {
	killed := testserver.StartRedis(t)
	if err := killed.Kill(); err != nil {
		t.Fatal(err)
	}
	return map[string]string{
		"refused":   "redis://" + nettest.RefusedAddr(t),
		"killed":    killed.URL(),
		"sentinels": "redis://" + nettest.RefusedAddr(t) + "?master_name=mymaster&addr=" + nettest.RefusedAddr(t),
	}
}

// A store that does not answer is one line on stderr and exit status 3
// for check: no clause is run, none is reported as failed.
func TestCheckDeadServer(t *testing.T) {
	for name, raw := range deadURLs(t) {
		t.Run(name, func(t *testing.T) {
			code, stdout, stderr := runArgs(t, "check", raw)
			if code != exitUnreachable {
				t.Errorf("exit status %d, want %d", code, exitUnreachable)
			}
			checkOneLine(t, stderr, "store unreachable")
			if stdout != "" || strings.Contains(stderr, "FAIL") {
				t.Errorf("stdout %q, stderr %q: want no clause reported", stdout, stderr)
			}

			code, stdout, stderr = runArgs(t, "check", "-json", raw)
			if code != exitUnreachable || stderr != "" {
				t.Errorf("-json: exit status %d, stderr %q", code, stderr)
			}
			lines := jsonLines(t, stdout)
			if len(lines) != 1 || lines[0].Clause != "ping" || lines[0].Status != "UNREACHABLE" || !strings.Contains(lines[0].Reason, "unavailable") {
				t.Errorf("-json: %+v, want one ping line UNREACHABLE", lines)
			}
		})
	}
}

// bench against a store that does not answer is one line on stderr and
// exit status 3, as check: no load is run.
func TestBenchDeadServer(t *testing.T) {
	for name, raw := range deadURLs(t) {
		t.Run(name, func(t *testing.T) {
			code, stdout, stderr := runArgs(t, "bench", raw)
			if code != exitUnreachable {
				t.Errorf("exit status %d, want %d", code, exitUnreachable)
			}
			checkOneLine(t, stderr, "store unreachable, nothing measured")
			if stdout != "" {
				t.Errorf("stdout %q, want nothing", stdout)
			}

			// -json: one JSON object on stdout, as check -json's ping line.
			code, stdout, stderr = runArgs(t, "bench", "-json", raw)
			if code != exitUnreachable || stderr != "" {
				t.Errorf("-json: exit status %d, stderr %q", code, stderr)
			}
			var got pingFailure
			if err := json.Unmarshal([]byte(stdout), &got); err != nil || strings.Count(stdout, "\n") != 1 ||
				got.Status != "UNREACHABLE" || !strings.Contains(got.Reason, "unavailable") || strings.Contains(got.Reason, "\n") {
				t.Errorf("-json: stdout %q (%v), want one object, status UNREACHABLE, a one-line reason", stdout, err)
			}
		})
	}
}

// A store that answers the ping with an error (a wrong password) is "store
// refused the ping", not "unreachable", exit status 3, for check and
// bench, in text and JSON; no output holds the password.
func TestPingRefused(t *testing.T) {
	srv := testserver.StartRedis(t, testserver.Password("right-pw"))
	raw := "redis://:wrong-pw@" + srv.Addr
	for _, cmd := range []string{"check", "bench"} {
		code, stdout, stderr := runArgs(t, cmd, raw)
		if code != exitUnreachable {
			t.Errorf("%s: exit status %d, want %d", cmd, code, exitUnreachable)
		}
		checkOneLine(t, stderr, "store refused the ping")
		code, stdout2, stderr2 := runArgs(t, cmd, "-json", raw)
		if code != exitUnreachable || stderr2 != "" || !strings.Contains(stdout2, `"status":"REFUSED"`) || strings.Count(stdout2, "\n") != 1 {
			t.Errorf("%s -json: exit status %d, stdout %q, stderr %q: want one REFUSED line", cmd, code, stdout2, stderr2)
		}
		if out := stdout + stderr + stdout2 + stderr2; strings.Contains(out, "wrong-pw") {
			t.Errorf("%s: the output holds the password: %q", cmd, out)
		}
	}
}

// A bench run whose calls all fail says so and exits 3; its throughput
// is 0, not the rate at which calls failed. The server answers Ping but
// has no FCALL, FUNCTION, EVAL or EVALSHA, so every Hit fails.
func TestBenchEveryCallFails(t *testing.T) {
	srv := testserver.StartRedis(t, testserver.ConfigLines(`rename-command EVALSHA ""`,
		`rename-command EVAL ""`, `rename-command FCALL ""`, `rename-command FUNCTION ""`))
	code, stdout, stderr := runArgs(t, "bench", "-d", "200ms", "-c", "2", "-ping", "10ms", srv.URL())
	if code != exitUnreachable {
		t.Errorf("exit status %d, want %d", code, exitUnreachable)
	}
	checkOneLine(t, stderr, "every call failed")
	if !strings.Contains(stdout, "throughput   0 hooks/s decided") || !strings.Contains(stdout, "100.0% of calls failed") {
		t.Errorf("report does not say nothing was decided:\n%s", stdout)
	}

	code, stdout, _ = runArgs(t, "bench", "-d", "200ms", "-c", "2", "-ping", "0", "-json", srv.URL())
	var rep benchReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("-json: %v\n%s", err, stdout)
	}
	if code != exitUnreachable || rep.Hooks == 0 || rep.Decided != 0 || rep.Throughput != 0 || rep.ErrorShare != 1 {
		t.Errorf("-json: exit %d, hooks %d, decided %d, throughput %v, error share %v", code, rep.Hooks, rep.Decided, rep.Throughput, rep.ErrorShare)
	}
}

// -max-errors sets the error share above which bench exits 1: through a
// proxy that hangs up on about one reply in ten, a run fails at 0 and
// passes at 0.9.
func TestBenchMaxErrors(t *testing.T) {
	srv := testserver.StartRedis(t)
	proxy := nettest.NewProxy(t, srv.Addr, func() nettest.ReplyFilter {
		var n atomic.Int64
		return func(chunk []byte) ([]byte, bool) {
			if n.Add(1)%10 == 5 {
				return nil, true
			}
			return chunk, false
		}
	})
	raw := "redis://" + proxy.Addr()
	code, stdout, stderr := runArgs(t, "bench", "-d", "300ms", "-c", "2", "-ping", "0", "-max-errors", "0", "-json", raw)
	var rep benchReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("-json: %v\n%s", err, stdout)
	}
	if rep.FailedCalls == 0 || rep.Decided == 0 {
		t.Fatalf("failed %d, decided %d: want some of each through the proxy (%v)", rep.FailedCalls, rep.Decided, rep.ErrorSamples)
	}
	if code != exitFail {
		t.Errorf("-max-errors 0: exit status %d, want %d", code, exitFail)
	}
	checkOneLine(t, stderr, "above -max-errors 0")
	if code, _, stderr := runArgs(t, "bench", "-d", "300ms", "-c", "2", "-ping", "0", "-max-errors", "0.9", raw); code != exitOK {
		t.Errorf("-max-errors 0.9: exit status %d, stderr %q", code, stderr)
	}
	for _, bad := range []string{"-1", "1.5", "NaN"} {
		if code, _, stderr := runArgs(t, "bench", "-d", "10ms", "-max-errors", bad); code != exitUsage || !strings.Contains(stderr, "-max-errors") {
			t.Errorf("-max-errors %s: exit status %d, stderr %q", bad, code, stderr)
		}
	}
}

// The default load decides most hooks OK: not rate-limited.
func TestBenchDefaultLoadMostlyOK(t *testing.T) {
	code, stdout, stderr := runArgs(t, "bench", "-d", "500ms", "-ping", "0", "-json")
	if code != exitOK {
		t.Fatalf("exit status %d, stderr %q", code, stderr)
	}
	var rep benchReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if ok := rep.Outcomes["ok"]; rep.Decided == 0 || ok*10 < rep.Decided*8 {
		t.Errorf("ok %d of %d decided (%v): want most", ok, rep.Decided, rep.Outcomes)
	}
}

// check -json prints one JSON line per clause, in document order; -only
// takes ids in any case.
func TestCheckJSON(t *testing.T) {
	code, stdout, stderr := runArgs(t, "check", "-json", "-only", "g1, C1,v1", "memory://")
	if code != exitOK {
		t.Fatalf("exit status %d, stderr %q", code, stderr)
	}
	lines := jsonLines(t, stdout)
	var ids []string
	for _, l := range lines {
		ids = append(ids, l.Clause)
		if l.Status != string(conformance.Pass) || l.Title == "" {
			t.Errorf("%+v: want PASS with a title", l)
		}
	}
	if strings.Join(ids, ",") != "G1,C1,V1" {
		t.Errorf("clauses %v, want G1,C1,V1", ids)
	}
	if code, _, stderr := runArgs(t, "check", "-only", "x9", "memory://"); code != exitUsage {
		t.Errorf("-only x9: exit status %d, stderr %q", code, stderr)
	}
}

func jsonLines(t *testing.T, out string) []clauseLine {
	t.Helper()
	var lines []clauseLine
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	for dec.More() {
		var l clauseLine
		if err := dec.Decode(&l); err != nil {
			t.Fatalf("not JSON lines: %v\n%s", err, out)
		}
		lines = append(lines, l)
	}
	if strings.Count(out, "\n") != len(lines) {
		t.Errorf("%d lines for %d objects:\n%s", strings.Count(out, "\n"), len(lines), out)
	}
	return lines
}

func TestVersionAndHelp(t *testing.T) {
	code, stdout, _ := runArgs(t, "version")
	if code != exitOK || !strings.HasPrefix(stdout, "fleetstore ") || !strings.Contains(stdout, "go1.") {
		t.Errorf("version: exit %d, %q", code, stdout)
	}
	for cmd, want := range map[string]string{"check": "-only", "bench": "-max-errors", "version": "VCS"} {
		code, stdout, _ := runArgs(t, "help", cmd)
		if code != exitOK || !strings.Contains(stdout, want) {
			t.Errorf("help %s: exit %d, %q lacks %q", cmd, code, stdout, want)
		}
	}
	code, stdout, _ = runArgs(t, "help")
	if code != exitOK || !strings.Contains(stdout, "130") || !strings.Contains(stdout, "version") {
		t.Errorf("help: exit %d, %q: want the commands and exit statuses", code, stdout)
	}
	if code, _, stderr := runArgs(t, "help", "nosuch"); code != exitUsage || !strings.Contains(stderr, "no command of that name") {
		t.Errorf("help nosuch: exit %d, %q", code, stderr)
	}
	// Two arguments: said as such, not "want one of", and neither echoed.
	if code, _, stderr := runArgs(t, "help", "bench", "redis://:s3cret@h"); code != exitUsage ||
		!strings.Contains(stderr, "takes at most one command, got 2 arguments") || strings.Contains(stderr, "s3cret") {
		t.Errorf("help bench extra: exit %d, %q", code, stderr)
	}
}

// A done context (Ctrl-C) stops bench, which prints what it measured and
// exits 130, and check, which exits 130 without waiting for the suite.
func TestInterrupted(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Second) // after the ping, during the load
	defer cancel()
	var out, errb bytes.Buffer
	if code := run(ctx, []string{"bench", "-d", "1h", "-ping", "0"}, &out, &errb); code != exitInterrupted {
		t.Errorf("bench: exit status %d, want %d; stderr %q", code, exitInterrupted, errb.String())
	}
	if !strings.Contains(out.String(), "(interrupted)") || !strings.Contains(errb.String(), "interrupted") {
		t.Errorf("bench: stdout %q, stderr %q: want the report, interrupted", out.String(), errb.String())
	}
	// Interrupted before anything ran: one line each.
	done, cancel := context.WithCancel(t.Context())
	cancel()
	for _, args := range [][]string{{"bench", "-d", "1h"}, {"check", "memory://"}} {
		out.Reset()
		errb.Reset()
		if code := run(done, args, &out, &errb); code != exitInterrupted {
			t.Errorf("%s: exit status %d, want %d; stderr %q", args[0], code, exitInterrupted, errb.String())
		}
		checkOneLine(t, errb.String(), "interrupted")
	}
}
