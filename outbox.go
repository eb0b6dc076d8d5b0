package fleetstore

import "time"

// queued is one commit in the outbox: the claim as Commit was given it and
// when, so that its replay keeps the expiry the commit gave it.
type queued struct {
	claim Claim
	at    time.Time // monotonic
	tries uint8     // replays the shared store answered with an error
}

// outbox is the bounded FIFO of commits awaiting replay (CONTRACT §8).
// Commits are pushed at the tail by callers; one replayer at a time takes
// batches from the head and puts back, at the head, those it could not
// settle. Its owner locks it.
type outbox struct {
	items    []queued
	head     int // items[:head] are gone
	inflight int // taken by the replayer, not yet settled or put back
	size     int // the bound of len + inflight
}

func (b *outbox) len() int { return len(b.items) - b.head + b.inflight }

// push queues q, or reports false when the outbox is full: it never blocks
// and never grows past its size.
func (b *outbox) push(q queued) bool {
	if b.len() >= b.size {
		return false
	}
	if b.head > 0 && b.head >= len(b.items)/2 {
		// Reuse the front half the replayer has emptied.
		n := copy(b.items, b.items[b.head:])
		clear(b.items[n:])
		b.items, b.head = b.items[:n], 0
	}
	b.items = append(b.items, q)
	return true
}

// take removes up to n commits from the head for the replayer, which must
// settle them or give them back.
func (b *outbox) take(n int) []queued {
	n = min(n, len(b.items)-b.head)
	out := make([]queued, n)
	copy(out, b.items[b.head:])
	clear(b.items[b.head : b.head+n])
	b.head += n
	b.inflight += n
	if b.head == len(b.items) {
		b.items, b.head = b.items[:0], 0
	}
	return out
}

// done ends a take: settled commits leave, back returns to the head in its
// order, ahead of everything queued since.
func (b *outbox) done(taken int, back []queued) {
	b.inflight -= taken
	if len(back) == 0 {
		return
	}
	if b.head >= len(back) {
		b.head -= len(back)
		copy(b.items[b.head:], back)
		return
	}
	b.items = append(append(make([]queued, 0, len(back)+len(b.items)-b.head), back...), b.items[b.head:]...)
	b.head = 0
}
