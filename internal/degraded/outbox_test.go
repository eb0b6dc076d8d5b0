package degraded

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore/driver"
)

// TestOutboxModel runs random pushes, takes and put-backs against a plain
// slice that models the outbox: the same commits come out in the same
// order (put-backs first), the length counts what is taken too, and a push
// past the size is refused. Sizes below, at and above a chunk's length.
func TestOutboxModel(t *testing.T) {
	for _, size := range []int{1, 7, chunkLen, chunkLen + 1, 5000} {
		t.Run(strconv.Itoa(size), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(size), 7))
			b := outbox{size: size}
			var model []int // keys of the queued commits, in order
			next := 0
			for step := range 20_000 {
				switch r := rng.IntN(10); {
				case r < 6:
					ok := b.push(queued{claim: driver.Claim{Key: strconv.Itoa(next)}})
					if want := len(model) < size; ok != want {
						t.Fatalf("step %d: push with %d of %d queued: %v", step, len(model), size, ok)
					}
					if ok {
						model = append(model, next)
					}
					next++
				default:
					n := 1 + rng.IntN(300)
					got := b.take(n)
					if want := min(n, len(model)); len(got) != want {
						t.Fatalf("step %d: take(%d) of %d: %d", step, n, len(model), len(got))
					}
					for i, q := range got {
						if q.claim.Key != strconv.Itoa(model[i]) {
							t.Fatalf("step %d: take %d is %s, want %d", step, i, q.claim.Key, model[i])
						}
					}
					if b.len() != len(model) {
						t.Fatalf("step %d: len %d while %d are taken, want %d", step, b.len(), len(got), len(model))
					}
					// Put back a random prefix (those that failed), settle the rest.
					k := rng.IntN(len(got) + 1)
					b.done(len(got), got[:k])
					model = append(model[:k:k], model[len(got):]...)
					if b.len() != len(model) {
						t.Fatalf("step %d: len %d after done, want %d", step, b.len(), len(model))
					}
				}
			}
		})
	}
}

// TestOutboxParked: commits parked to wait for another hook's pending
// claim count in the outbox's length and its bound, are taken only from
// their due time on (earliest first in next), and not by take; dueNow
// makes them all due.
func TestOutboxParked(t *testing.T) {
	b := outbox{size: 3}
	t0 := time.Now()
	for _, k := range []string{"a", "b", "c"} {
		if !b.push(queued{claim: driver.Claim{Key: k}}) {
			t.Fatalf("push %s refused", k)
		}
	}
	got := b.take(3)
	b.done(3, nil)
	b.park([]waiting{{q: got[0], due: t0.Add(2 * time.Second)}, {q: got[1], due: t0.Add(time.Second)}})
	if b.len() != 2 {
		t.Fatalf("len %d with 2 parked, want 2", b.len())
	}
	if due, ok := b.next(); !ok || !due.Equal(t0.Add(time.Second)) {
		t.Errorf("next %v %v, want the earliest due time", due, ok)
	}
	if !b.push(queued{claim: driver.Claim{Key: "d"}}) || b.push(queued{claim: driver.Claim{Key: "e"}}) {
		t.Fatal("the bound counts parked commits: want 1 more push taken of size 3, then none")
	}
	if due, ok := b.next(); !ok || !due.IsZero() {
		t.Errorf("next %v %v with a commit in the FIFO, want now", due, ok)
	}
	if q := b.take(10); len(q) != 1 || q[0].claim.Key != "d" {
		t.Fatalf("take %+v, want the FIFO's d only, not the parked ones", q)
	}
	b.done(1, nil)
	if q := b.takeDue(t0.Add(500*time.Millisecond), 10); len(q) != 0 {
		t.Errorf("takeDue before any is due: %+v", q)
	}
	q := b.takeDue(t0.Add(1500*time.Millisecond), 10)
	if len(q) != 1 || q[0].claim.Key != "b" || b.len() != 2 {
		t.Fatalf("takeDue at +1.5s: %+v (len %d), want b, len 2", q, b.len())
	}
	b.done(1, nil)
	b.dueNow()
	if q := b.takeDue(t0, 10); len(q) != 1 || q[0].claim.Key != "a" {
		t.Fatalf("takeDue after dueNow: %+v, want a", q)
	}
	b.done(1, nil)
	if _, ok := b.next(); ok || b.len() != 0 {
		t.Errorf("empty outbox: next ok %v, len %d", ok, b.len())
	}
}
