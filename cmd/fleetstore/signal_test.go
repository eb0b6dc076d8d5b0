package main

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// asCommand is the environment variable that makes the test binary run
// main instead of the tests (TestMain): TestCtrlC signals a process of
// the command without building it again.
const asCommand = "FLEETSTORE_TEST_AS_COMMAND"

// caughtFile is the environment variable naming a file the command, run
// by a test, creates once it catches SIGINT and SIGTERM (signalsCaught).
const caughtFile = "FLEETSTORE_TEST_CAUGHT_FILE"

func TestMain(m *testing.M) {
	if os.Getenv(asCommand) == "1" {
		if path := os.Getenv(caughtFile); path != "" {
			signalsCaught = func() { _ = os.WriteFile(path, nil, 0o600) }
		}
		main()
	}
	os.Exit(m.Run())
}

// TestCtrlC: the command, in a process of its own, sent SIGINT once it
// has started, stops and exits 130: bench after printing its report,
// check at once.
func TestCtrlC(t *testing.T) {
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		args  []string
		ready string // a line on stdout once it runs
		want  string // in stdout after the signal
	}{
		{[]string{"bench", "-d", "1h", "-ping", "0", "-json"}, "", `"interrupted": true`},
		{[]string{"check", "-v", "memory://"}, "fleetstore check memory://", ""},
	} {
		cmd := exec.Command(bin, tt.args...)
		caught := filepath.Join(t.TempDir(), "caught")
		cmd.Env = append(os.Environ(), asCommand+"=1", caughtFile+"="+caught)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		r := bufio.NewReader(stdout)
		if tt.ready != "" {
			line, err := r.ReadString('\n')
			if err != nil || !strings.HasPrefix(line, tt.ready) {
				t.Fatalf("%s: first line %q, %v", tt.args[0], line, err)
			}
		} else {
			// Signalled once it catches SIGINT (a loaded machine can take
			// longer than any fixed wait to start it), then given a moment
			// to start its run.
			deadline := time.Now().Add(30 * time.Second)
			for _, err := os.Stat(caught); err != nil; _, err = os.Stat(caught) {
				if time.Now().After(deadline) {
					t.Fatalf("%s: SIGINT not caught 30s after the start", tt.args[0])
				}
				time.Sleep(5 * time.Millisecond)
			}
			time.Sleep(300 * time.Millisecond)
		}
		if err := cmd.Process.Signal(os.Interrupt); err != nil {
			t.Fatal(err)
		}
		var rest strings.Builder
		_, _ = r.WriteTo(&rest)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err = <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Signal(syscall.SIGKILL)
			t.Fatalf("%s: still running 30s after SIGINT", tt.args[0])
		}
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != exitInterrupted {
			t.Errorf("%s: %v, want exit status %d; stderr %q", tt.args[0], err, exitInterrupted, stderr.String())
		}
		if !strings.Contains(stderr.String(), "interrupted") || !strings.Contains(rest.String(), tt.want) {
			t.Errorf("%s: stdout %q, stderr %q", tt.args[0], rest.String(), stderr.String())
		}
	}
}
