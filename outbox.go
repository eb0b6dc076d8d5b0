package fleetstore

import "time"

// queued is one commit in the outbox: the claim as Commit was given it and
// when, so that its replay keeps the expiry the commit gave it.
type queued struct {
	claim Claim
	at    time.Time // monotonic
	tries uint8     // replays the shared store answered with an error
}

// chunkLen is how many commits one chunk of the outbox holds: a push never
// copies more than the chunk it starts (a long outage's outbox is never
// copied whole under the lock, as a growing slice would be).
const chunkLen = 1024

// outbox is the bounded FIFO of commits awaiting replay (CONTRACT §8).
// Commits are pushed at the tail by callers; one replayer at a time takes
// batches from the head and puts back, at the head, those it could not
// settle. Its owner locks it.
type outbox struct {
	front    []queued   // put back by the replayer: taken first
	chunks   [][]queued // the FIFO, chunkLen commits each
	first    int        // the next commit of chunks[0]
	queued   int        // in front and chunks
	inflight int        // taken by the replayer, not yet settled or put back
	size     int        // the bound of queued + inflight
}

func (b *outbox) len() int { return b.queued + b.inflight }

// push queues q, or reports false when the outbox is full: it never blocks
// and never grows past its size.
func (b *outbox) push(q queued) bool {
	if b.len() >= b.size {
		return false
	}
	if n := len(b.chunks); n == 0 || len(b.chunks[n-1]) == chunkLen {
		b.chunks = append(b.chunks, make([]queued, 0, min(chunkLen, b.size)))
	}
	last := &b.chunks[len(b.chunks)-1]
	*last = append(*last, q)
	b.queued++
	return true
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
