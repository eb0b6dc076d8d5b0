// Package outboxlog keeps the degraded mode's outbox on the node's disk:
// an append-only log of queued commits that survives the process (a crash,
// kill -9) so that they are replayed at the next Open (CONTRACT §8).
//
// The log is a directory of segment files of checksummed frames (CRC-32C)
// and a LOCK file that one Log at a time holds (flock). Append returns
// once its records are fsynced; appends that arrive while a sync runs
// share the next one (group fsync: one leader writes and syncs what every
// waiting committer queued, no timer). Ack marks records replayed with a
// frame of its own; a segment is deleted once it and every older one hold
// no live record, the whole log starts over when none is live, and the
// oldest segment's live records are copied forward when the dead bytes
// outgrow the live ones, so the disk holds at most about
// 2 × live bytes + 3 × Options.SegmentBytes.
//
// Open reads every segment, truncates a torn or corrupt tail at its first
// bad frame (one log line for the Open: what was dropped), and returns
// the records appended and not acknowledged, oldest first.
package outboxlog

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"

	"go.uber.org/zap"
)

// DefaultSegmentBytes is Options.SegmentBytes when it is 0: 4 MiB, about
// 40 000 commits of 100 bytes.
const DefaultSegmentBytes = 4 << 20

var (
	// ErrClosed is returned by a call on a closed Log.
	ErrClosed = errors.New("outboxlog: closed")
	// ErrLocked is the error of an Open whose directory another Log
	// holds, in this process or another; the error names the directory.
	ErrLocked = errors.New("directory locked by another outbox log")

	errNotSegment = errors.New("not an outbox segment")
)

// Options configures a Log.
type Options struct {
	// Logger gets the one line of an Open that truncated a torn or
	// corrupt tail. nil: no logging.
	Logger *zap.Logger
	// SegmentBytes is the size at which the log starts a new segment
	// file, ≥ 0 bytes. 0: DefaultSegmentBytes.
	SegmentBytes int64
}

// Stats is a Log's state.
type Stats struct {
	Live      int    // records appended and not acknowledged
	LiveBytes int64  // their frames' bytes
	Bytes     int64  // the segments' bytes on disk
	Segments  int    // segment files
	Syncs     uint64 // fsyncs of a batch of frames since Open
}

// Log is an open outbox log. Its methods are safe for concurrent use.
type Log struct {
	dir      string
	segBytes int64
	lock     *os.File

	mu      sync.Mutex
	cond    sync.Cond
	f       *os.File   // the current segment, the last of segs: only the leader writes it
	segs    []*segment // oldest first
	live    map[uint64]loc
	liveB   int64 // of every live frame
	next    uint64
	buf     []byte // frames queued for the next batch
	adds    []loc  // the commits in buf: seq and frame length
	spare   []byte
	spareA  []loc
	batch   uint64 // the batch buf fills
	durable uint64 // the last batch synced
	syncing bool   // a leader writes a batch: it alone touches the files
	closed  bool
	err     error // a failed write or sync: the Log takes nothing more
	syncs   uint64

	beforeSync func() // tests: called by the leader before it writes
}

// loc is where a live record is: its segment and its frame's length (for
// an add, seg is its seq until the leader places it).
type loc struct {
	seg uint64
	n   int64
}

// Open opens the log in dir, creating the directory (0700) when missing,
// and returns the records still queued, in Seq order. It fails with an
// error wrapping ErrLocked when another Log holds dir, and with an error
// for a segment file whose header is not the log's (nothing is changed).
// A torn or corrupt frame ends its segment: the segment is truncated
// there, the frames after it in that segment dropped with it (nothing
// past a bad frame is trusted), later segments read on, and Open logs one
// warning for all it cut (the first segment, offset, bytes dropped).
func Open(dir string, opts Options) (*Log, []Record, error) {
	if opts.SegmentBytes < 0 {
		return nil, nil, fmt.Errorf("outboxlog: Options.SegmentBytes: %d, want ≥ 0",
			opts.SegmentBytes)
	}
	if opts.SegmentBytes == 0 {
		opts.SegmentBytes = DefaultSegmentBytes
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("outboxlog: %w", err)
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, nil, err
	}
	l := &Log{dir: dir, segBytes: opts.SegmentBytes, lock: lock,
		live: make(map[uint64]loc), next: 1, batch: 1}
	l.cond.L = &l.mu
	recs, err := l.load(opts.Logger)
	if err != nil {
		_ = lock.Close()
		return nil, nil, err
	}
	return l, recs, nil
}

// load reads the segments into l and opens the current one.
func (l *Log) load(logger *zap.Logger) ([]Record, error) {
	ids, err := listSegments(l.dir)
	if err != nil {
		return nil, err
	}
	recs := make(map[uint64]Record)
	acked := make(map[uint64]bool)
	var cut truncation
	for _, id := range ids {
		path := segPath(l.dir, id)
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("outboxlog: %w", err)
		}
		seg := &segment{id: id}
		l.segs = append(l.segs, seg)
		valid, err := scan(data, func(p *payload, raw []byte) {
			switch p.kind {
			case kindCommit:
				l.next = max(l.next, p.rec.Seq+1)
				if acked[p.rec.Seq] {
					return
				}
				if old, ok := l.live[p.rec.Seq]; ok { // a copy made by compaction
					l.forget(old)
				}
				recs[p.rec.Seq] = p.rec
				l.place(p.rec.Seq, seg, int64(len(raw)))
			case kindAck:
				for _, seq := range p.acks {
					l.next = max(l.next, seq+1)
					acked[seq] = true
					if old, ok := l.live[seq]; ok {
						l.forget(old)
						delete(l.live, seq)
						delete(recs, seq)
					}
				}
			}
		})
		if err != nil {
			return nil, fmt.Errorf("outboxlog: %s: %w", path, err)
		}
		if valid < len(data) {
			if err := truncate(path, valid); err != nil {
				return nil, err
			}
			cut.add(path, valid, len(data)-valid)
		}
		seg.size = int64(valid)
	}
	cut.log(logger, l.dir)
	if err := l.openCurrent(); err != nil {
		return nil, err
	}
	out := make([]Record, 0, len(recs))
	for _, r := range recs {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b Record) int { return cmp.Compare(a.Seq, b.Seq) })
	return out, nil
}

// openCurrent starts the log afresh when no record is live (every segment
// deleted), else appends to the last segment, or to a new one when the
// last is full or torn at its creation.
func (l *Log) openCurrent() error {
	var last *segment
	if len(l.segs) > 0 {
		last = l.segs[len(l.segs)-1]
	}
	if len(l.live) == 0 {
		for _, s := range l.segs {
			if err := os.Remove(segPath(l.dir, s.id)); err != nil {
				return fmt.Errorf("outboxlog: %w", err)
			}
		}
		l.segs = nil
	} else if last.size >= int64(len(magic)) && last.size < l.segBytes {
		f, err := os.OpenFile(segPath(l.dir, last.id), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return fmt.Errorf("outboxlog: %w", err)
		}
		l.f = f
		return nil
	}
	id := uint64(1)
	if last != nil {
		id = last.id + 1
	}
	return l.addSegment(id)
}

// addSegment creates segment id and makes it the current one.
func (l *Log) addSegment(id uint64) error {
	f, err := createSegment(l.dir, id)
	if err != nil {
		return err
	}
	if l.f != nil {
		_ = l.f.Close() // synced with its last batch
	}
	l.f = f
	l.segs = append(l.segs, &segment{id: id, size: int64(len(magic))})
	return nil
}

func truncate(path string, size int) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("outboxlog: %w", err)
	}
	err = f.Truncate(int64(size))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("outboxlog: truncate: %w", err)
	}
	return nil
}

// truncation sums up what an Open cut off, for its one log line.
type truncation struct {
	first  string // the first segment cut
	offset int    // where
	files  int
	bytes  int
}

func (t *truncation) add(path string, offset, n int) {
	if t.files == 0 {
		t.first, t.offset = path, offset
	}
	t.files++
	t.bytes += n
}

func (t *truncation) log(logger *zap.Logger, dir string) {
	if t.files == 0 || logger == nil {
		return
	}
	logger.Warn("outbox log: torn or corrupt tail truncated",
		zap.String("dir", dir), zap.String("segment", t.first),
		zap.Int("offset", t.offset), zap.Int("dropped_bytes", t.bytes),
		zap.Int("segments", t.files))
}

// segment returns the live segment id, or nil.
func (l *Log) segment(id uint64) *segment {
	i, ok := slices.BinarySearchFunc(l.segs, id,
		func(s *segment, id uint64) int { return cmp.Compare(s.id, id) })
	if !ok {
		return nil
	}
	return l.segs[i]
}

// place records seq as live in seg, its frame n bytes long.
func (l *Log) place(seq uint64, seg *segment, n int64) {
	l.live[seq] = loc{seg: seg.id, n: n}
	seg.live++
	l.liveB += n
}

// forget takes a live frame out of its segment's counts (the caller
// deletes or replaces its map entry).
func (l *Log) forget(at loc) {
	if s := l.segment(at.seg); s != nil {
		s.live--
	}
	l.liveB -= at.n
}

// Stats returns the log's counts.
func (l *Log) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return Stats{Live: len(l.live), LiveBytes: l.liveB, Bytes: l.diskBytes(),
		Segments: len(l.segs), Syncs: l.syncs}
}

// diskBytes is the log's size on disk: its segments' bytes.
func (l *Log) diskBytes() int64 {
	var n int64
	for _, s := range l.segs {
		n += s.size
	}
	return n
}
