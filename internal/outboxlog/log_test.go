package outboxlog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/fleetstore/fleetstore/driver"
)

// rec is the i-th test record: every field derived from i.
func rec(i int) Record {
	return Record{
		Claim: driver.Claim{Tenant: "t", SourceID: "stripe", Key: fmt.Sprintf("evt_%d", i),
			HookID: fmt.Sprintf("hook-%d", i), Node: "node-a",
			TTL: time.Duration(i+1) * time.Millisecond},
		QueuedAt: time.UnixMicro(1_700_000_000_000_000 + int64(i)),
	}
}

func recs(from, to int) []Record {
	var out []Record
	for i := from; i < to; i++ {
		out = append(out, rec(i))
	}
	return out
}

func open(t *testing.T, dir string, opts Options) (*Log, []Record) {
	t.Helper()
	l, got, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l, got
}

func observed() (*zap.Logger, *observer.ObservedLogs) {
	core, logs := observer.New(zapcore.DebugLevel)
	return zap.New(core), logs
}

// sameRecords fails unless got holds want's records, in order, equal in
// every field the log keeps.
func sameRecords(t *testing.T, got, want []Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d records, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		w.Claim.PendingTTL = 0
		if g.Seq != w.Seq || g.Claim != w.Claim || !g.QueuedAt.Equal(w.QueuedAt) {
			t.Fatalf("record %d: got %+v, want %+v", i, g, w)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l, got := open(t, dir, Options{})
	if len(got) != 0 {
		t.Fatalf("a new log holds %d records", len(got))
	}
	rs := recs(0, 10)
	rs[0].Claim = driver.Claim{Tenant: strings.Repeat("T", maxIDLen),
		SourceID: strings.Repeat("S", maxIDLen), Key: strings.Repeat("\x00\xff", maxIDLen/2),
		HookID: strings.Repeat("H", maxHookLen), Node: strings.Repeat("N", maxHookLen),
		TTL: maxTTL, PendingTTL: time.Second}
	rs[1].Claim.Node = ""
	rs[1].Claim.TTL = minTTL
	rs[2].QueuedAt = time.UnixMicro(-5) // before 1970: kept as well
	if err := l.Append(rs[:4]); err != nil {
		t.Fatal(err)
	}
	if err := l.Append(rs[4:]); err != nil {
		t.Fatal(err)
	}
	for i, r := range rs {
		if r.Seq != uint64(i+1) {
			t.Fatalf("record %d: Seq %d, want %d", i, r.Seq, i+1)
		}
	}
	if err := l.Ack(rs[3].Seq, rs[7].Seq, 999); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	want := append(append(append([]Record{}, rs[:3]...), rs[4:7]...), rs[8:]...)

	l, got = open(t, dir, Options{})
	sameRecords(t, got, want)
	more := recs(10, 11)
	if err := l.Append(more); err != nil {
		t.Fatal(err)
	}
	if more[0].Seq != 11 {
		t.Fatalf("Seq after a reopen: %d, want 11", more[0].Seq)
	}
}

func TestAppendInvalid(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", maxIDLen+1)
	tests := []struct {
		give func(*driver.Claim)
		want string
	}{
		{func(c *driver.Claim) { c.Tenant = "" }, "claim.Tenant"},
		{func(c *driver.Claim) { c.SourceID = long }, "claim.SourceID"},
		{func(c *driver.Claim) { c.Key = "" }, "claim.Key"},
		{func(c *driver.Claim) { c.HookID = long[:maxHookLen+1] }, "claim.HookID"},
		{func(c *driver.Claim) { c.Node = long[:maxHookLen+1] }, "claim.Node"},
		{func(c *driver.Claim) { c.TTL = 0 }, "claim.TTL"},
		{func(c *driver.Claim) { c.TTL = maxTTL + 1 }, "claim.TTL"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			l, _ := open(t, dir, Options{})
			rs := recs(0, 3)
			tt.give(&rs[2].Claim)
			err := l.Append(rs)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Append: %v, want an error naming %s", err, tt.want)
			}
			if s := l.Stats(); s.Live != 0 || s.Syncs != 0 {
				t.Fatalf("after a refused Append: %+v", s)
			}
			_ = l.Close()
			_, got := open(t, dir, Options{})
			if len(got) != 0 {
				t.Fatalf("a refused Append left %d records", len(got))
			}
		})
	}
}

func TestClosed(t *testing.T) {
	t.Parallel()
	l, _ := open(t, t.TempDir(), Options{})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Append(recs(0, 1)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close: %v", err)
	}
	if err := l.Ack(1); !errors.Is(err, ErrClosed) {
		t.Fatalf("Ack after Close: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("Close again: %v", err)
	}
}

// TestGroupFsync holds the first batch's sync until 63 more appenders
// have queued their records: they all share the second sync.
func TestGroupFsync(t *testing.T) {
	t.Parallel()
	const n = 64
	l, _ := open(t, t.TempDir(), Options{})
	var once sync.Once
	l.beforeSync = func() {
		once.Do(func() {
			deadline := time.Now().Add(time.Minute)
			for {
				l.mu.Lock()
				queued := len(l.adds)
				l.mu.Unlock()
				if queued == n-1 || time.Now().After(deadline) {
					return
				}
				time.Sleep(time.Millisecond)
			}
		})
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() { errs <- l.Append(recs(i, i+1)) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if s := l.Stats(); s.Syncs != 2 || s.Live != n {
		t.Fatalf("%d appenders: %+v, want 2 syncs and %d live", n, s, n)
	}
}

// lastFrames appends n records one by one and returns the file's segment
// and the offset at which each record's frame starts.
func appendEach(t *testing.T, l *Log, n int) (starts []int64) {
	t.Helper()
	for i := range n {
		starts = append(starts, l.Stats().Bytes)
		if err := l.Append(recs(i, i+1)); err != nil {
			t.Fatal(err)
		}
	}
	return starts
}

func onlySegment(t *testing.T, dir string) string {
	t.Helper()
	ids, err := listSegments(dir)
	if err != nil || len(ids) != 1 {
		t.Fatalf("segments: %v, %v", ids, err)
	}
	return segPath(dir, ids[0])
}

// TestTornTail cuts the file inside the last frame at every offset: Open
// keeps the whole records, truncates, logs one line, and a second Open
// finds nothing to cut.
func TestTornTail(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l, _ := open(t, dir, Options{})
	starts := appendEach(t, l, 20)
	size := l.Stats().Bytes
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	path := onlySegment(t, dir)
	whole, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	last := starts[len(starts)-1]
	for cut := last + 1; cut < size; cut++ {
		if err := os.WriteFile(path, whole[:cut], 0o600); err != nil {
			t.Fatal(err)
		}
		logger, logs := observed()
		l, got := open(t, dir, Options{Logger: logger})
		want := recs(0, 19)
		for i := range want {
			want[i].Seq = uint64(i + 1)
		}
		sameRecords(t, got, want)
		if n := logs.Len(); n != 1 {
			t.Fatalf("cut at %d: %d log lines, want 1", cut, n)
		}
		f := logs.All()[0].ContextMap()
		if f["offset"] != last || f["dropped_bytes"] != cut-last || f["segment"] != path {
			t.Fatalf("cut at %d: logged %v", cut, f)
		}
		if fi, _ := os.Stat(path); fi.Size() != last {
			t.Fatalf("cut at %d: file is %d bytes, want %d", cut, fi.Size(), last)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		logger, logs = observed()
		l, got = open(t, dir, Options{Logger: logger})
		if len(got) != 19 || logs.Len() != 0 {
			t.Fatalf("second Open: %d records, %d log lines", len(got), logs.Len())
		}
		_ = l.Close()
	}
}

// TestCorruptMiddle flips one byte of a frame in the middle: Open stops
// at that frame, truncates the segment there and logs what it dropped
// (the records after it in the same segment are not trusted). A later
// segment's records are kept.
func TestCorruptMiddle(t *testing.T) {
	t.Parallel()
	for _, where := range []string{"crc", "length", "payload"} {
		t.Run(where, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			l, _ := open(t, dir, Options{SegmentBytes: 1 << 30})
			starts := appendEach(t, l, 10)
			size := l.Stats().Bytes
			_ = l.Close()
			path := onlySegment(t, dir)
			data, _ := os.ReadFile(path)
			at := map[string]int64{"length": 0, "crc": 4, "payload": frameHeader + 5}[where]
			data[starts[5]+at] ^= 0x40
			_ = os.WriteFile(path, data, 0o600)

			logger, logs := observed()
			_, got := open(t, dir, Options{Logger: logger})
			want := recs(0, 5)
			for i := range want {
				want[i].Seq = uint64(i + 1)
			}
			sameRecords(t, got, want)
			if logs.Len() != 1 || logs.All()[0].ContextMap()["dropped_bytes"] != size-starts[5] {
				t.Fatalf("logged %v", logs.All())
			}
		})
	}
	t.Run("older segment", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		l, _ := open(t, dir, Options{SegmentBytes: 200})
		appendEach(t, l, 20)
		_ = l.Close()
		ids, _ := listSegments(dir)
		if len(ids) < 3 {
			t.Fatalf("%d segments, want ≥ 3", len(ids))
		}
		lost := 0 // the records of the segment that is cut
		data, _ := os.ReadFile(segPath(dir, ids[1]))
		_, _ = scan(data, func(*payload, []byte) { lost++ })
		data[len(magic)+frameHeader+1] ^= 1 // its first frame
		_ = os.WriteFile(segPath(dir, ids[1]), data, 0o600)

		logger, logs := observed()
		_, got := open(t, dir, Options{Logger: logger})
		if len(got) != 20-lost || logs.Len() != 1 {
			t.Fatalf("%d records, want %d; %d log lines", len(got), 20-lost, logs.Len())
		}
		if got[len(got)-1].Seq != 20 {
			t.Fatalf("the newest record is %d, want 20", got[len(got)-1].Seq)
		}
	})
}

func TestNotSegment(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := segPath(dir, 7)
	if err := os.WriteFile(path, []byte("something else"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err := Open(dir, Options{})
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("Open: %v, want an error naming %s", err, path)
	}
	if data, _ := os.ReadFile(path); string(data) != "something else" {
		t.Fatalf("Open changed a file that is not its own: %q", data)
	}
	// The lock went with the failed Open.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	open(t, dir, Options{})
}

// TestDiskBounded keeps one record live while thousands are appended and
// acknowledged: the segments behind it are copied forward and deleted,
// and the disk stays within the package's bound.
func TestDiskBounded(t *testing.T) {
	t.Parallel()
	const seg = 4096
	dir := t.TempDir()
	l, _ := open(t, dir, Options{SegmentBytes: seg})
	pinned := recs(0, 1)
	if err := l.Append(pinned); err != nil {
		t.Fatal(err)
	}
	peak := int64(0)
	for i := 1; i < 2000; i += 10 {
		rs := recs(i, i+10)
		if err := l.Append(rs); err != nil {
			t.Fatal(err)
		}
		if err := l.Ack(rs[0].Seq, rs[3].Seq, rs[9].Seq); err != nil {
			t.Fatal(err)
		}
		var rest []uint64
		for _, r := range rs {
			rest = append(rest, r.Seq)
		}
		if err := l.Ack(rest...); err != nil {
			t.Fatal(err)
		}
		s := l.Stats()
		peak = max(peak, s.Bytes)
		if s.Bytes > 2*s.LiveBytes+3*seg {
			t.Fatalf("after %d records: %+v, over 2 × live + 3 × %d", i+10, s, seg)
		}
	}
	if s := l.Stats(); s.Live != 1 {
		t.Fatalf("%+v, want 1 live", s)
	}
	_ = l.Close()
	ents, _ := os.ReadDir(dir)
	if len(ents) > 4 { // LOCK and ≤ 3 segments
		t.Fatalf("%d files in the directory", len(ents))
	}
	l, got := open(t, dir, Options{SegmentBytes: seg})
	pinned[0].Seq = 1
	sameRecords(t, got, pinned)
	if err := l.Ack(1); err != nil {
		t.Fatal(err)
	}
	if s := l.Stats(); s.Segments != 1 || s.Bytes != int64(len(magic)) {
		t.Fatalf("nothing live: %+v, want one empty segment", s)
	}
	t.Logf("peak %d bytes on disk", peak)
}

func TestLockSameProcess(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l, _ := open(t, dir, Options{})
	_, _, err := Open(dir, Options{})
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("second Open: %v, want ErrLocked naming %s", err, dir)
	}
	_ = l.Close()
	open(t, dir, Options{})
}

func TestSegmentTornAtCreation(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l, _ := open(t, dir, Options{SegmentBytes: 100})
	appendEach(t, l, 3)
	_ = l.Close()
	ids, _ := listSegments(dir)
	next := segPath(dir, ids[len(ids)-1]+1)
	if err := os.WriteFile(next, []byte(magic[:3]), 0o600); err != nil {
		t.Fatal(err)
	}
	logger, logs := observed()
	l, got := open(t, dir, Options{SegmentBytes: 100, Logger: logger})
	if len(got) != 3 || logs.Len() != 1 {
		t.Fatalf("%d records, %d log lines", len(got), logs.Len())
	}
	if err := l.Append(recs(3, 4)); err != nil {
		t.Fatal(err)
	}
	_ = l.Close()
	_, got = open(t, dir, Options{SegmentBytes: 100})
	if len(got) != 4 {
		t.Fatalf("%d records, want 4", len(got))
	}
	if _, err := os.Stat(filepath.Join(dir, "LOCK")); err != nil {
		t.Fatal(err)
	}
}
