package gcra_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore/gcra"
)

const (
	ms  = int64(1000)    // µs
	sec = int64(1000000) // µs
	// epoch is a time in µs since 1970 around today (2027): TATs at this
	// scale must be computed exactly.
	epoch = int64(1_800_000_000_123_457)
)

// TestCharge checks single charges against golden values computed by hand
// from CONTRACT §3.
func TestCharge(t *testing.T) {
	tests := []struct {
		name                    string
		now, tat, inc, capacity int64
		want                    gcra.Decision
		wantRetryAfterMillis    int64 // checked when !want.Conform
	}{
		// Increment = capacity = 10 s, first hit at 0 (TAT now 10 s).
		{name: "10s fresh at 0", now: 0, tat: 0, inc: 10 * sec, capacity: 10 * sec,
			want: gcra.Decision{Conform: true, TAT: 10 * sec}},
		{name: "10s at 5s waits 5000ms", now: 5 * sec, tat: 10 * sec, inc: 10 * sec, capacity: 10 * sec,
			want: gcra.Decision{TAT: 10 * sec, Wait: 5 * sec}, wantRetryAfterMillis: 5000},
		{name: "10s at 9.9995s waits 1ms, not 0", now: 9_999_500, tat: 10 * sec, inc: 10 * sec, capacity: 10 * sec,
			want: gcra.Decision{TAT: 10 * sec, Wait: 500}, wantRetryAfterMillis: 1},
		{name: "10s at 9.999999s waits 1ms", now: 9_999_999, tat: 10 * sec, inc: 10 * sec, capacity: 10 * sec,
			want: gcra.Decision{TAT: 10 * sec, Wait: 1}, wantRetryAfterMillis: 1},
		{name: "10s at 10s conforms", now: 10 * sec, tat: 10 * sec, inc: 10 * sec, capacity: 10 * sec,
			want: gcra.Decision{Conform: true, TAT: 20 * sec}},
		{name: "10s at 4.0005s rounds 5999.5ms up", now: 4_000_500, tat: 10 * sec, inc: 10 * sec, capacity: 10 * sec,
			want: gcra.Decision{TAT: 10 * sec, Wait: 5_999_500}, wantRetryAfterMillis: 6000},

		// Increment 1.9 s, burst 3: the third charge leaves TAT 5.7 s ahead.
		{name: "1.9s third of burst 3", now: 100 * sec, tat: 100*sec + 3_800_000, inc: 1_900_000, capacity: 5_700_000,
			want: gcra.Decision{Conform: true, TAT: 100*sec + 5_700_000}},
		{name: "1.9s fourth waits 1900ms", now: 100 * sec, tat: 100*sec + 5_700_000, inc: 1_900_000, capacity: 5_700_000,
			want: gcra.Decision{TAT: 100*sec + 5_700_000, Wait: 1_900_000}, wantRetryAfterMillis: 1900},
		{name: "1.9s at 1.8999995s later waits 1µs", now: 100*sec + 1_899_999, tat: 100*sec + 5_700_000, inc: 1_900_000, capacity: 5_700_000,
			want: gcra.Decision{TAT: 100*sec + 5_700_000, Wait: 1}, wantRetryAfterMillis: 1},
		{name: "1.9s conforms 1.9s later", now: 100*sec + 1_900_000, tat: 100*sec + 5_700_000, inc: 1_900_000, capacity: 5_700_000,
			want: gcra.Decision{Conform: true, TAT: 100*sec + 7_600_000}},

		// Increment 125 µs, burst 8 (capacity 1 ms).
		{name: "125µs ninth waits 125µs", now: 7 * sec, tat: 7*sec + ms, inc: 125, capacity: ms,
			want: gcra.Decision{TAT: 7*sec + ms, Wait: 125}, wantRetryAfterMillis: 1},
		{name: "125µs conforms 125µs later", now: 7*sec + 125, tat: 7*sec + ms, inc: 125, capacity: ms,
			want: gcra.Decision{Conform: true, TAT: 7*sec + ms + 125}},

		// A stored TAT in the past is a full bucket: t = now.
		{name: "expired tat", now: 50 * sec, tat: 3 * sec, inc: 2 * sec, capacity: 2 * sec,
			want: gcra.Decision{Conform: true, TAT: 52 * sec}},

		// Increment > capacity never conforms, even on a fresh bucket.
		{name: "over capacity fresh", now: 1 * sec, tat: 0, inc: 11, capacity: 10,
			want: gcra.Decision{TAT: 0, Wait: 1}, wantRetryAfterMillis: 1},

		// Today's epoch: exact to the µs.
		{name: "epoch conform", now: epoch, tat: epoch + 999_999, inc: sec, capacity: 2 * sec,
			want: gcra.Decision{Conform: true, TAT: 1_800_000_002_123_456}},
		{name: "epoch deny by 1µs", now: epoch, tat: epoch + 1_000_001, inc: sec, capacity: 2 * sec,
			want: gcra.Decision{TAT: 1_800_000_001_123_458, Wait: 1}, wantRetryAfterMillis: 1},
		{name: "epoch deny 1000.001ms", now: epoch, tat: epoch + 2_000_001, inc: sec, capacity: 2 * sec,
			want: gcra.Decision{TAT: 1_800_000_002_123_458, Wait: 1_000_001}, wantRetryAfterMillis: 1001},
		{name: "epoch fresh 125µs", now: epoch, tat: 0, inc: 125, capacity: 125,
			want: gcra.Decision{Conform: true, TAT: 1_800_000_000_123_582}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := gcra.Charge(tt.now, tt.tat, tt.inc, tt.capacity)
			if got != tt.want {
				t.Fatalf("Charge(now=%d, tat=%d, I=%d, C=%d) = %+v, want %+v", tt.now, tt.tat, tt.inc, tt.capacity, got, tt.want)
			}
			if !got.Conform {
				if ra := gcra.RetryAfterMillis(got.Wait); ra != tt.wantRetryAfterMillis {
					t.Errorf("RetryAfterMillis(%d) = %d, want %d", got.Wait, ra, tt.wantRetryAfterMillis)
				}
			}
		})
	}
}

// TestChargeBurst checks G1 on golden inputs: exactly burst back-to-back
// charges conform on a fresh bucket and the next waits one increment.
func TestChargeBurst(t *testing.T) {
	tests := []struct {
		name       string
		now, inc   int64
		burst      int64
		wantMillis int64 // retry-after of the charge after the burst
	}{
		{name: "1µs burst 1", now: 0, inc: 1, burst: 1, wantMillis: 1},
		{name: "125µs burst 8", now: 42, inc: 125, burst: 8, wantMillis: 1},
		{name: "1ms burst 1000", now: sec, inc: ms, burst: 1000, wantMillis: 1},
		{name: "1.9s burst 3", now: epoch, inc: 1_900_000, burst: 3, wantMillis: 1900},
		{name: "10s burst 1", now: epoch, inc: 10 * sec, burst: 1, wantMillis: 10000},
		{name: "1h burst 24 at epoch", now: epoch, inc: 3600 * sec, burst: 24, wantMillis: 3_600_000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			capacity := tt.inc * tt.burst
			tat := int64(0)
			for i := int64(0); i < tt.burst; i++ {
				d := gcra.Charge(tt.now, tat, tt.inc, capacity)
				if !d.Conform {
					t.Fatalf("charge %d of burst %d denied (wait %dµs)", i+1, tt.burst, d.Wait)
				}
				if want := tt.now + (i+1)*tt.inc; d.TAT != want {
					t.Fatalf("charge %d: TAT %d, want %d", i+1, d.TAT, want)
				}
				tat = d.TAT
			}
			d := gcra.Charge(tt.now, tat, tt.inc, capacity)
			if d.Conform {
				t.Fatalf("charge %d of burst %d conformed", tt.burst+1, tt.burst)
			}
			if d.Wait != tt.inc || d.TAT != tat {
				t.Fatalf("charge after burst: %+v, want wait %d and TAT %d unchanged", d, tt.inc, tat)
			}
			if got := gcra.RetryAfterMillis(d.Wait); got != tt.wantMillis {
				t.Errorf("retry-after %dms, want %dms", got, tt.wantMillis)
			}
			// Retrying exactly at the retry-after conforms (G2).
			if d := gcra.Charge(tt.now+tt.wantMillis*ms, tat, tt.inc, capacity); !d.Conform {
				t.Errorf("retry at retry-after %dms denied (wait %dµs)", tt.wantMillis, d.Wait)
			}
		})
	}
}

// TestChargeOverCapacity: an increment above the capacity never conforms,
// whatever the bucket's state and however long one waits.
func TestChargeOverCapacity(t *testing.T) {
	for _, now := range []int64{0, 1, 10 * sec, epoch} {
		for _, tat := range []int64{0, now / 2, now} {
			if d := gcra.Charge(now, tat, 1_000_001, 1_000_000); d.Conform || d.Wait <= 0 {
				t.Errorf("Charge(now=%d, tat=%d, I=C+1) = %+v, want denied with a positive wait", now, tat, d)
			}
		}
	}
}

func TestRetryAfterMillis(t *testing.T) {
	tests := []struct{ give, want int64 }{
		{give: 0, want: 1},
		{give: 1, want: 1},
		{give: 999, want: 1},
		{give: 1000, want: 1},
		{give: 1001, want: 2},
		{give: 1999, want: 2},
		{give: 2000, want: 2},
		{give: 2001, want: 3},
		{give: 5_000_000, want: 5000},
		{give: 31_622_400_000_000, want: 31_622_400_000}, // 366 days
	}
	for _, tt := range tests {
		if got := gcra.RetryAfterMillis(tt.give); got != tt.want {
			t.Errorf("RetryAfterMillis(%d) = %d, want %d", tt.give, got, tt.want)
		}
	}
}

func TestRetryAfter(t *testing.T) {
	tests := []struct {
		give int64 // µs
		want time.Duration
	}{
		{give: -5, want: time.Millisecond},
		{give: 0, want: time.Millisecond},
		{give: 1, want: time.Millisecond},
		{give: 1000, want: time.Millisecond},
		{give: 1001, want: 2 * time.Millisecond},
		{give: 1_899_999, want: 1900 * time.Millisecond},
		{give: 1_900_000, want: 1900 * time.Millisecond},
		{give: 3_600_000_001, want: time.Hour + time.Millisecond},
		{give: 31_622_400_000_000, want: 366 * 24 * time.Hour},
	}
	for _, tt := range tests {
		if got := gcra.RetryAfter(tt.give); got != tt.want {
			t.Errorf("RetryAfter(%d) = %v, want %v", tt.give, got, tt.want)
		}
	}
}

// TestChargeProperty compares Charge with a naive simulation: for random
// increment I and burst B, exactly B charges conform back-to-back at a
// random time, the next is denied with a wait of I, and after sleeping the
// rounded-up retry-after a charge conforms again while one µs less (when
// the wait is whole ms) does not.
func TestChargeProperty(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(1, seed))
	for i := 0; i < 2000; i++ {
		inc := 1 + rng.Int64N(5*sec)
		burst := 1 + rng.Int64N(50)
		now := rng.Int64N(epoch)
		capacity := inc * burst
		tat := int64(0)
		admitted := int64(0)
		for {
			d := gcra.Charge(now, tat, inc, capacity)
			if !d.Conform {
				if d.Wait != inc {
					t.Fatalf("I=%d B=%d now=%d: wait after burst %d, want %d", inc, burst, now, d.Wait, inc)
				}
				break
			}
			admitted++
			tat = d.TAT
			if admitted > burst {
				break
			}
		}
		if admitted != burst {
			t.Fatalf("I=%d B=%d now=%d: %d back-to-back charges conformed, want %d", inc, burst, now, admitted, burst)
		}
		ra := gcra.RetryAfterMillis(inc) * ms
		if d := gcra.Charge(now+ra, tat, inc, capacity); !d.Conform {
			t.Fatalf("I=%d B=%d: retry at %dµs denied", inc, burst, ra)
		}
		if d := gcra.Charge(now+inc-1, tat, inc, capacity); d.Conform {
			t.Fatalf("I=%d B=%d: retry 1µs before the wait conformed", inc, burst)
		}
		// After waiting k increments, exactly k more charges conform.
		k := 1 + rng.Int64N(burst)
		later := now + k*inc
		n := int64(0)
		for ; n <= burst; n++ {
			d := gcra.Charge(later, tat, inc, capacity)
			if !d.Conform {
				break
			}
			tat = d.TAT
		}
		if n != k {
			t.Fatalf("I=%d B=%d: %d charges conformed %d increments after the burst, want %d", inc, burst, n, k, k)
		}
	}
}
