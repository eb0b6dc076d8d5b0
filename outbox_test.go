package fleetstore

import (
	"math/rand/v2"
	"strconv"
	"testing"
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
					ok := b.push(queued{claim: Claim{Key: strconv.Itoa(next)}})
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
