// Package testchild starts this test binary again as a child process, for
// the tests that kill a process (kill -9) and look at what it left: the
// child's body is a test function that returns at once unless its
// environment gives it a mode.
package testchild

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Start runs the test function body (e.g. "TestNodeProcess") of this test
// binary as a child process, with env ("NAME=value") added to the
// environment, and returns it once it has printed the line "open" (lines
// before it are skipped: a TestMain's banner), with its stdout's next
// lines and its stdin. A line "open: …" before it, or its end, fails t.
// The child is killed when t ends.
func Start(t testing.TB, body string, env ...string) (*exec.Cmd, *bufio.Scanner, io.WriteCloser) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+body+"$")
	cmd.Env = append(os.Environ(), env...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := bufio.NewScanner(out)
	for lines.Scan() {
		if lines.Text() == "open" {
			return cmd, lines, stdin
		}
		if strings.HasPrefix(lines.Text(), "open:") {
			t.Fatalf("%s: %s", body, lines.Text())
		}
	}
	t.Fatalf("%s ended before it said open: %v", body, lines.Err())
	return nil, nil, nil
}
