package outboxlog

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore/internal/testing/testchild"
)

// The child process: this test binary run again with helperEnv set to a
// mode and helperDir to the log's directory.
const (
	helperEnv = "OUTBOXLOG_HELPER"
	helperDir = "OUTBOXLOG_DIR"
)

// TestHelperProcess is the child's body, not a test: it returns at once
// in a normal run.
func TestHelperProcess(t *testing.T) {
	mode := os.Getenv(helperEnv)
	if mode == "" {
		return
	}
	l, _, err := Open(os.Getenv(helperDir), Options{})
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(2)
	}
	switch mode {
	case "hold": // hold the lock until stdin closes
		fmt.Println("open")
		_, _ = io.Copy(io.Discard, os.Stdin)
		_ = l.Close()
	case "append": // append until killed (or 2 minutes), reporting each sync
		var mu sync.Mutex
		report := func(format string, args ...any) {
			mu.Lock()
			defer mu.Unlock()
			_, _ = fmt.Fprintf(os.Stdout, format, args...) // one write: one line
		}
		report("open\n")
		deadline := time.Now().Add(2 * time.Minute)
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				for i := 0; time.Now().Before(deadline); i++ {
					r := rec(g*1_000_000 + i)
					rs := []Record{r}
					if err := l.Append(rs); err != nil {
						report("error %v\n", err)
						return
					}
					report("synced %d %s\n", rs[0].Seq, r.Claim.Key)
					if i%10 == 9 {
						// Once "acking" is out the record may be gone
						// after a kill, its Ack synced before "acked" was.
						report("acking %d\n", rs[0].Seq)
						if err := l.Ack(rs[0].Seq); err != nil {
							report("error %v\n", err)
							return
						}
						report("acked %d\n", rs[0].Seq)
					}
				}
			})
		}
		wg.Wait()
	}
	os.Exit(0)
}

// child starts the helper in mode on dir and returns it once it has the
// log open, with its stdout and stdin.
func child(t *testing.T, mode, dir string) (*exec.Cmd, *bufio.Scanner, io.WriteCloser) {
	t.Helper()
	return testchild.Start(t, "TestHelperProcess", helperEnv+"="+mode, helperDir+"="+dir)
}

func TestLockOtherProcess(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cmd, _, stdin := child(t, "hold", dir)
	_, _, err := Open(dir, Options{})
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("Open beside another process: %v, want ErrLocked naming %s", err, dir)
	}
	_ = stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
	open(t, dir, Options{})
}

// TestKill9 kills a process that appends from 8 goroutines once it has
// reported 3 000 records synced: every record it reported synced and not
// acknowledged is in the log when it is opened again, none it reported
// acknowledged is (one whose Ack was under way may be either).
func TestKill9(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cmd, lines, _ := child(t, "append", dir)
	synced := make(map[uint64]string)
	acked, acking := make(map[uint64]bool), make(map[uint64]bool)
	read := func(line string) {
		var seq uint64
		var key string
		switch {
		case strings.HasPrefix(line, "synced "):
			if _, err := fmt.Sscanf(line, "synced %d %s", &seq, &key); err != nil {
				t.Fatalf("child: %q", line)
			}
			synced[seq] = key
		case strings.HasPrefix(line, "acking "):
			if _, err := fmt.Sscanf(line, "acking %d", &seq); err != nil {
				t.Fatalf("child: %q", line)
			}
			acking[seq] = true
		case strings.HasPrefix(line, "acked "):
			if _, err := fmt.Sscanf(line, "acked %d", &seq); err != nil {
				t.Fatalf("child: %q", line)
			}
			acked[seq] = true
		default:
			t.Fatalf("child: %q", line)
		}
	}
	for len(synced) < 3000 && lines.Scan() {
		read(lines.Text())
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for lines.Scan() { // what it wrote before it died
		read(lines.Text())
	}
	if err := cmd.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("child: %v, want killed", err)
	}

	_, got := open(t, dir, Options{})
	in := make(map[uint64]string, len(got))
	for _, r := range got {
		in[r.Seq] = r.Claim.Key
	}
	lost := 0
	for seq, key := range synced {
		if acked[seq] {
			if _, ok := in[seq]; ok {
				t.Errorf("record %d was acknowledged, and is back", seq)
			}
		} else if in[seq] != key && !acking[seq] {
			lost++
		}
	}
	if lost > 0 {
		t.Fatalf("%d of %d records reported synced are not in the log", lost, len(synced))
	}
	t.Logf("%d synced, %d acknowledged, %d in the log after kill -9",
		len(synced), len(acked), len(got))
}

// TestReopenWhileForking: a Log closed and opened again at once, while
// the process starts child processes, opens: a child lends itself the
// parent's open files (the LOCK file's too) until its exec closes them,
// which lockDir waits out. Without the wait one Open in a few hundred
// fails with ErrLocked.
func TestReopenWhileForking(t *testing.T) {
	dir := t.TempDir()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				_ = exec.Command("true").Run()
			}
		})
	}
	defer func() { close(stop); wg.Wait() }()
	for i := range 300 {
		l, _, err := Open(dir, Options{})
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
