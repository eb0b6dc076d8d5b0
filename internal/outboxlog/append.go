package outboxlog

import (
	"fmt"
	"os"
)

// Append queues recs in the log and returns once they are on disk
// (fsynced), setting each one's Seq. Appends that arrive while another
// batch is being synced share the next sync. A claim outside
// driver.Claim's limits is an error naming the field, and nothing of recs
// is written; after Close the error is ErrClosed; after a failed write or
// sync every call returns that failure (the log cannot tell what reached
// the disk: Open it again to know).
func (l *Log) Append(recs []Record) error {
	if len(recs) == 0 {
		return nil
	}
	for i := range recs {
		if err := check(&recs[i].Claim); err != nil {
			return err
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usable(); err != nil {
		return err
	}
	for i := range recs {
		r := &recs[i]
		r.Seq = l.next
		l.next++
		start := len(l.buf)
		l.buf = appendFrame(l.buf, func(b []byte) []byte { return appendCommit(b, r) })
		l.adds = append(l.adds, loc{seg: r.Seq, n: int64(len(l.buf) - start)})
	}
	return l.waitLocked()
}

// Ack marks records replayed or expired, by Seq, and returns once that is
// on disk: an acknowledged record is not returned by a later Open. A Seq
// that is not live (acknowledged already, or never returned by Append or
// Open) is skipped. Errors as Append's.
func (l *Log) Ack(seqs ...uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usable(); err != nil {
		return err
	}
	known := make([]uint64, 0, len(seqs))
	for _, s := range seqs {
		if at, ok := l.live[s]; ok {
			l.forget(at)
			delete(l.live, s)
			known = append(known, s)
		}
	}
	if len(known) == 0 {
		return nil
	}
	for len(known) > 0 {
		n := min(len(known), maxAckSeqs)
		l.buf = appendFrame(l.buf, func(b []byte) []byte { return appendAck(b, known[:n]) })
		known = known[n:]
	}
	return l.waitLocked()
}

func (l *Log) usable() error {
	if l.closed {
		return ErrClosed
	}
	return l.err
}

// waitLocked waits until the batch that holds what the caller queued is
// synced, leading a batch itself whenever none is being written.
func (l *Log) waitLocked() error {
	mine := l.batch
	for l.durable < mine {
		if l.err != nil {
			return l.err
		}
		if l.syncing {
			l.cond.Wait()
			continue
		}
		l.flushLocked()
	}
	return nil
}

// flushLocked writes and syncs the batch queued so far, as its leader:
// the lock is let go during the disk's work, and syncing keeps every other
// caller off the files meanwhile.
func (l *Log) flushLocked() {
	l.syncing = true
	n := l.batch
	l.batch++
	buf, adds := l.buf, l.adds
	l.buf, l.adds = l.spare[:0], l.spareA[:0]
	err := l.writeLocked(buf, adds)
	l.spare, l.spareA = buf[:0], adds[:0]
	l.syncing = false
	if err != nil {
		l.err = fmt.Errorf("outboxlog: %w", err)
	} else {
		l.durable = n
	}
	l.cond.Broadcast()
}

// writeLocked is the leader's disk work for one batch: start over when
// nothing is live, start a new segment when the current one is full,
// place the batch's commits, copy the oldest segment's live records
// forward when dead bytes outgrow live ones, write, sync, and delete the
// segments left with nothing live.
func (l *Log) writeLocked(buf []byte, adds []loc) error {
	cur := l.segs[len(l.segs)-1]
	if len(l.live) == 0 && len(adds) == 0 {
		// Only acks of records that are all replayed: no file need hold
		// them.
		if len(l.segs) > 1 || cur.size > int64(len(magic)) {
			return l.restart()
		}
		return nil
	}
	if cur.size >= l.segBytes {
		l.mu.Unlock()
		err := l.f.Sync() // synced already; cheap, and a closed file must be whole
		l.mu.Lock()
		if err == nil {
			err = l.addSegment(cur.id + 1)
		}
		if err != nil {
			return err
		}
		cur = l.segs[len(l.segs)-1]
	}
	for _, a := range adds {
		l.place(a.seg, cur, a.n)
	}
	var moved []byte
	if len(l.segs) > 1 && l.diskBytes() > 2*l.liveB+2*l.segBytes {
		var err error
		if moved, err = l.compactLocked(cur); err != nil {
			return err
		}
	}
	f, hook := l.f, l.beforeSync
	l.mu.Unlock()
	if hook != nil {
		hook()
	}
	_, err := f.Write(moved)
	if err == nil {
		_, err = f.Write(buf)
	}
	if err == nil {
		err = f.Sync()
	}
	l.mu.Lock()
	if err != nil {
		return err
	}
	written := int64(len(moved) + len(buf))
	cur.size += written
	l.syncs++
	return l.dropDeadLocked()
}

// compactLocked copies the live records of the oldest segment into the
// current one (cur), returning their frames to write before the batch;
// the oldest is then dead and deleted after the sync. A record keeps its
// Seq: Open takes the last copy.
func (l *Log) compactLocked(cur *segment) ([]byte, error) {
	old := l.segs[0]
	l.mu.Unlock()
	data, err := os.ReadFile(segPath(l.dir, old.id)) // no one writes an old segment
	l.mu.Lock()
	if err != nil {
		return nil, err
	}
	var moved []byte
	_, err = scan(data, func(p *payload, raw []byte) {
		at, ok := l.live[p.rec.Seq]
		if p.kind != kindCommit || !ok || at.seg != old.id {
			return
		}
		l.forget(at)
		l.place(p.rec.Seq, cur, at.n)
		moved = append(moved, raw...)
	})
	if err != nil {
		return nil, err
	}
	return moved, nil
}

// dropDeadLocked deletes the oldest segments while they hold nothing
// live, the current one excepted. Acks in a deleted segment are of
// records in it or in older, deleted, ones: nothing comes back.
func (l *Log) dropDeadLocked() error {
	var dead []uint64
	for len(l.segs) > 1 && l.segs[0].live == 0 {
		dead = append(dead, l.segs[0].id)
		l.segs = l.segs[1:]
	}
	if len(dead) == 0 {
		return nil
	}
	l.mu.Unlock()
	defer l.mu.Lock()
	for _, id := range dead {
		if err := os.Remove(segPath(l.dir, id)); err != nil {
			return err
		}
	}
	return syncDir(l.dir)
}

// restart empties the log once nothing in it is live: older segments
// deleted, the current one cut back to its header.
func (l *Log) restart() error {
	cur := l.segs[len(l.segs)-1]
	old := l.segs[:len(l.segs)-1]
	l.segs = []*segment{cur}
	f := l.f
	l.mu.Unlock()
	var err error
	for _, s := range old {
		if err = os.Remove(segPath(l.dir, s.id)); err != nil {
			break
		}
	}
	if err == nil {
		err = f.Truncate(int64(len(magic)))
	}
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = syncDir(l.dir)
	}
	l.mu.Lock()
	if err != nil {
		return err
	}
	cur.size = int64(len(magic))
	l.syncs++
	return nil
}

// Close writes what is queued, waits for the batch being synced, and
// releases the directory. Calls after it return ErrClosed; Close again
// returns nil. It returns the error of a failed write or sync, if any.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	for l.err == nil && (l.syncing || len(l.buf) > 0) {
		if l.syncing {
			l.cond.Wait()
			continue
		}
		l.flushLocked()
	}
	for l.syncing { // a failed batch's leader still on its way out
		l.cond.Wait()
	}
	err := l.err
	l.cond.Broadcast()
	l.mu.Unlock()
	if cerr := l.f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("outboxlog: %w", cerr)
	}
	if cerr := l.lock.Close(); err == nil && cerr != nil { // drops the flock
		err = fmt.Errorf("outboxlog: %w", cerr)
	}
	return err
}
