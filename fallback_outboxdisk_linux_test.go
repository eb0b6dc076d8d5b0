package fleetstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/fleetstore/fleetstore"
)

// TestFallbackOutboxDirDiskFails: with Fallback.OutboxDir, a degraded
// Commit whose write to the outbox's disk fails is neither queued nor
// committed locally and fails with the outage's error (CONTRACT §8), and
// so does every later one until the Store is opened again, even once the
// disk works: the log takes nothing after a failure. The failure is the
// kernel's: the outbox's open segment is swapped, under its descriptor,
// for /dev/full (every write ENOSPC), then swapped back. One log line
// says so. What was queued before the failure is replayed by the next
// Open. Fails with a Store that queues a commit it could not write, that
// queues again once the disk works, or that loses the earlier commits.
func TestFallbackOutboxDirDiskFails(t *testing.T) {
	t.Parallel()
	a, d, name, dir := outageOnDisk(t)
	ctx := context.Background()
	commit := func(i int) error {
		t.Helper()
		c := hookClaim(fmt.Sprintf("k-%d", i), fmt.Sprintf("h-%d", i))
		if res, err := a.Hit(ctx, []fleetstore.Charge{bigCharge}, &c); err != nil || !res.Local || res.Outcome != fleetstore.OK {
			t.Fatalf("degraded hit %d: %+v %v", i, res, err)
		}
		return a.Commit(ctx, c)
	}
	for i := range 3 {
		if err := commit(i); err != nil {
			t.Fatalf("degraded commit %d: %v, want nil (queued)", i, err)
		}
	}

	seg := segmentFD(t, dir)
	saved, err := unix.FcntlInt(uintptr(seg), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(saved)
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skipf("no /dev/full: %v", err)
	}
	defer full.Close()
	if err := unix.Dup3(int(full.Fd()), seg, unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	failed := commit(3)
	if err := unix.Dup3(saved, seg, unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(failed, fleetstore.ErrUnavailable) || !strings.Contains(failed.Error(), "not queued") {
		t.Errorf("commit on a full disk: %v, want ErrUnavailable, not queued", failed)
	}
	for i := 4; i < 6; i++ {
		if err := commit(i); !errors.Is(err, fleetstore.ErrUnavailable) {
			t.Errorf("commit %d after the disk failed, the disk working again: %v, want ErrUnavailable "+
				"until reopened", i, err)
		}
	}
	if s := a.FallbackStats(); s.Outbox != 3 || s.Dropped != 3 {
		t.Errorf("stats %+v, want 3 queued, 3 dropped", s)
	}
	if got := logCount(a.logs, "outbox directory failed"); got != 1 {
		t.Errorf("%d lines saying the outbox directory failed, want 1", got)
	}
	// Not committed locally: another hook's Hit on a refused commit's claim
	// here takes it (the refused hook's own claim is pending, held by it).
	other := hookClaim("k-5", "h-other")
	if res, err := a.Hit(ctx, nil, &other); err != nil || res.Outcome == fleetstore.Duplicate {
		t.Errorf("k-5, whose commit failed, at this node: %+v %v, want no Duplicate", res, err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}

	d.set(healthy)
	b := openOnFlaky(t, d, name, fleetstore.Fallback{OutboxDir: dir})
	if s := recovered(t, b); s.Replayed != 3 {
		t.Errorf("stats after the reopen %+v, want the 3 commits queued before the failure replayed", s)
	}
	for i := range 6 {
		probe := hookClaim(fmt.Sprintf("k-%d", i), "h-probe")
		res, err := b.shared.Hit(ctx, nil, &probe)
		if dup := err == nil && res.Outcome == fleetstore.Duplicate; dup != (i < 3) {
			t.Errorf("k-%d in the shared store: %+v %v, want committed: %v", i, res, err, i < 3)
		}
	}
}

// segmentFD is this process's descriptor of the outbox's open segment in
// dir (the one file there ending in .seg that it holds open).
func segmentFD(t *testing.T, dir string) int {
	t.Helper()
	dir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	fd := -1
	for _, e := range ents {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err != nil || filepath.Dir(target) != dir || !strings.HasSuffix(target, ".seg") {
			continue
		}
		if fd >= 0 {
			t.Fatalf("two open segments in %s", dir)
		}
		if fd, err = strconv.Atoi(e.Name()); err != nil {
			t.Fatalf("/proc/self/fd/%s: %v", e.Name(), err)
		}
	}
	if fd < 0 {
		t.Fatalf("no open segment in %s", dir)
	}
	return fd
}
