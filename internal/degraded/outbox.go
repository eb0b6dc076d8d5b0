package degraded

import (
	"time"

	"github.com/fleetstore/fleetstore/driver"
)

// queued is one commit in the outbox: the claim as Commit was given it and
// when, so that its replay keeps the expiry the commit gave it.
type queued struct {
	claim driver.Claim
	at    time.Time // monotonic; by the wall clock only for one read back from the disk
	seq   uint64    // its record in the outbox log (Rules.OutboxDir), 0 without one
	tries uint8     // replays the shared store answered with an error
}

// chunkLen is how many commits one chunk of the outbox holds: a push never
// copies more than the chunk it starts (a long outage's outbox is never
// copied whole under the lock, as a growing slice would be).
const chunkLen = 1024

// waiting is a queued commit that met another hook's pending claim: it is
// replayed again from due on (CONTRACT §8).
type waiting struct {
	q   queued
	due time.Time // monotonic
}

// outbox is the bounded FIFO of commits awaiting replay (CONTRACT §8).
// Commits are pushed at the tail by callers; one replayer at a time takes
// batches from the head and puts back, at the head, those it could not
// settle, and aside (park) those that wait for another hook's claim. Its
// owner locks it.
type outbox struct {
	front    []queued   // put back by the replayer: taken first
	chunks   [][]queued // the FIFO, chunkLen commits each
	first    int        // the next commit of chunks[0]
	queued   int        // in front and chunks
	inflight int        // taken by the replayer, not yet settled or put back
	waiting  []waiting  // parked, in no order: few, each retried at its due time
	reserved int        // room taken by commits being written to the log (reserve)
	size     int        // the bound of queued + inflight + waiting + reserved
}

func (b *outbox) len() int { return b.queued + b.inflight + len(b.waiting) }

// reserve takes room for one commit, or reports false when the outbox is
// full: the commit is pushed (pushReserved) once its record is on disk,
// or the room given back (unreserve).
func (b *outbox) reserve() bool {
	if b.len()+b.reserved >= b.size {
		return false
	}
	b.reserved++
	return true
}

func (b *outbox) unreserve(n int) { b.reserved -= n }

// pushReserved queues q into room reserve took.
func (b *outbox) pushReserved(q queued) {
	b.reserved--
	b.add(q)
}

// push queues q, or reports false when the outbox is full: it never blocks
// and never grows past its size.
func (b *outbox) push(q queued) bool {
	if !b.reserve() {
		return false
	}
	b.pushReserved(q)
	return true
}

func (b *outbox) add(q queued) {
	if n := len(b.chunks); n == 0 || len(b.chunks[n-1]) == chunkLen {
		b.chunks = append(b.chunks, make([]queued, 0, min(chunkLen, b.size)))
	}
	last := &b.chunks[len(b.chunks)-1]
	*last = append(*last, q)
	b.queued++
}

// take removes up to n commits from the head for the replayer, which must
// settle them or give them back with done.
func (b *outbox) take(n int) []queued {
	out := make([]queued, 0, min(n, b.queued))
	k := copy(out[:min(n, len(b.front))], b.front)
	out = out[:k]
	b.front = b.front[k:]
	if len(b.front) == 0 {
		b.front = nil
	}
	for len(out) < n && len(b.chunks) > 0 {
		c := b.chunks[0][b.first:]
		k := min(n-len(out), len(c))
		out = append(out, c[:k]...)
		clear(c[:k]) // the claims' strings belong to the replayer now
		b.first += k
		if c0 := b.chunks[0]; b.first == len(c0) && (len(b.chunks) > 1 || len(c0) == cap(c0)) {
			// Read through, and no push will fill it further: drop it.
			b.chunks[0] = nil
			b.chunks = b.chunks[1:]
			b.first = 0
		} else if k == 0 {
			break // the last chunk, read up to its tail
		}
	}
	b.queued -= len(out)
	b.inflight += len(out)
	return out
}

// takeDue removes up to n parked commits whose due time is not after now,
// for the replayer, which must settle them or give them back with done
// (or park them again).
func (b *outbox) takeDue(now time.Time, n int) []queued {
	var out []queued
	kept := b.waiting[:0]
	for _, w := range b.waiting {
		if len(out) < n && !w.due.After(now) {
			out = append(out, w.q)
			continue
		}
		kept = append(kept, w)
	}
	clear(b.waiting[len(kept):])
	b.waiting = kept
	b.inflight += len(out)
	return out
}

// park sets aside commits taken that met another hook's pending claim, to
// wait for their due time; done ends their take as it does the others'.
func (b *outbox) park(ws []waiting) {
	b.waiting = append(b.waiting, ws...)
}

// next reports when the replayer has work: now (the zero time) when the
// FIFO holds commits, else the earliest due time of a parked one; ok is
// false when the outbox is empty.
func (b *outbox) next() (due time.Time, ok bool) {
	if b.queued+b.inflight > 0 {
		return time.Time{}, true
	}
	for i, w := range b.waiting {
		if i == 0 || w.due.Before(due) {
			due = w.due
		}
	}
	return due, len(b.waiting) > 0
}

// dueNow makes every parked commit due (the last replay at Close).
func (b *outbox) dueNow() {
	for i := range b.waiting {
		b.waiting[i].due = time.Time{}
	}
}

// done ends a take: settled commits leave, back returns to the head in its
// order, ahead of everything queued since.
func (b *outbox) done(taken int, back []queued) {
	b.inflight -= taken
	if len(back) == 0 {
		return
	}
	b.front = append(back[:len(back):len(back)], b.front...)
	b.queued += len(back)
}
