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

// TestCtrlC: the built command, sent SIGINT once it has started, stops
// and exits 130: bench after printing its report, check at once.
func TestCtrlC(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command")
	}
	bin := filepath.Join(t.TempDir(), "fleetstore")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
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
