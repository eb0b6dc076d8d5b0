package gcra_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore/gcra"
)

func TestRate(t *testing.T) {
	tests := []struct {
		name          string
		n             int64
		period        time.Duration
		burst         int64
		wantIncrement time.Duration
		wantCapacity  time.Duration
	}{
		{name: "10/s burst 5", n: 10, period: time.Second, burst: 5, wantIncrement: 100 * time.Millisecond, wantCapacity: 500 * time.Millisecond},
		{name: "1000/s burst 10", n: 1000, period: time.Second, burst: 10, wantIncrement: time.Millisecond, wantCapacity: 10 * time.Millisecond},
		{name: "8000/s is 125µs", n: 8000, period: time.Second, burst: 8, wantIncrement: 125 * time.Microsecond, wantCapacity: time.Millisecond},
		{name: "3/s rounds up", n: 3, period: time.Second, burst: 1, wantIncrement: 333334 * time.Microsecond, wantCapacity: 333334 * time.Microsecond},
		{name: "3/s burst 3 rounds capacity up", n: 3, period: time.Second, burst: 3, wantIncrement: 333334 * time.Microsecond, wantCapacity: 1000002 * time.Microsecond},
		{name: "1/min burst 60", n: 1, period: time.Minute, burst: 60, wantIncrement: time.Minute, wantCapacity: time.Hour},
		{name: "10/19s is 1.9s", n: 10, period: 19 * time.Second, burst: 2, wantIncrement: 1900 * time.Millisecond, wantCapacity: 3800 * time.Millisecond},
		{name: "more than 1/µs is 1µs", n: 3_000_000, period: time.Second, burst: 1, wantIncrement: time.Microsecond, wantCapacity: time.Microsecond},
		{name: "1/day burst 366 is MaxCapacity", n: 1, period: 24 * time.Hour, burst: 366, wantIncrement: 24 * time.Hour, wantCapacity: gcra.MaxCapacity},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inc, capacity, err := gcra.Rate(tt.n, tt.period, tt.burst)
			if err != nil {
				t.Fatalf("Rate(%d, %v, %d): %v", tt.n, tt.period, tt.burst, err)
			}
			if inc != tt.wantIncrement || capacity != tt.wantCapacity {
				t.Fatalf("Rate(%d, %v, %d) = %v, %v, want %v, %v", tt.n, tt.period, tt.burst, inc, capacity, tt.wantIncrement, tt.wantCapacity)
			}
		})
	}
}

// TestRateSubMicrosecondPeriod: a sub-µs part of the period rounds up
// too ("a limit is never looser than asked"): 1 per 1.5µs is an increment
// of 2µs, and 2 per 3.0005ms is 1.501ms, not 1.5ms.
func TestRateSubMicrosecondPeriod(t *testing.T) {
	tests := []struct {
		n       int64
		period  time.Duration
		wantInc time.Duration
	}{
		{n: 1, period: 1500 * time.Nanosecond, wantInc: 2 * time.Microsecond},
		{n: 2, period: 3*time.Millisecond + 500*time.Nanosecond, wantInc: 1501 * time.Microsecond},
	}
	for _, tt := range tests {
		inc, _, err := gcra.Rate(tt.n, tt.period, 1)
		if err != nil || inc != tt.wantInc {
			t.Errorf("Rate(%d, %v, 1) = %v, %v, want %v, nil", tt.n, tt.period, inc, err, tt.wantInc)
		}
	}
}

func TestRateErrors(t *testing.T) {
	tests := []struct {
		name   string
		n      int64
		period time.Duration
		burst  int64
	}{
		{name: "zero n", n: 0, period: time.Second, burst: 1},
		{name: "negative n", n: -1, period: time.Second, burst: 1},
		{name: "zero period", n: 1, period: 0, burst: 1},
		{name: "negative period", n: 1, period: -time.Second, burst: 1},
		{name: "sub-µs period", n: 1, period: 999 * time.Nanosecond, burst: 1},
		{name: "zero burst", n: 1, period: time.Second, burst: 0},
		{name: "negative burst", n: 1, period: time.Second, burst: -5},
		{name: "capacity 367 days", n: 1, period: 24 * time.Hour, burst: 367},
		{name: "capacity 1µs over", n: 1, period: gcra.MaxCapacity + time.Microsecond, burst: 1},
		{name: "overflowing product", n: 1, period: math.MaxInt64, burst: math.MaxInt64},
		{name: "huge burst", n: 1_000_000, period: time.Second, burst: math.MaxInt64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inc, capacity, err := gcra.Rate(tt.n, tt.period, tt.burst)
			if !errors.Is(err, gcra.ErrRate) {
				t.Fatalf("Rate(%d, %v, %d) = %v, %v, %v, want ErrRate", tt.n, tt.period, tt.burst, inc, capacity, err)
			}
			if inc != 0 || capacity != 0 {
				t.Errorf("Rate error with nonzero results %v, %v", inc, capacity)
			}
		})
	}
}

func TestByteRate(t *testing.T) {
	const (
		kib = 1024
		mib = 1024 * kib
	)
	tests := []struct {
		name             string
		bps, burst, body int64
		wantInc, wantCap time.Duration
	}{
		{name: "1 MiB/s, 1 KiB body rounds up", bps: mib, burst: mib, body: kib, wantInc: 977 * time.Microsecond, wantCap: time.Second},
		{name: "1000 B/s, 1 byte", bps: 1000, burst: 5000, body: 1, wantInc: time.Millisecond, wantCap: 5 * time.Second},
		{name: "3 B/s rounds both up", bps: 3, burst: 10, body: 1, wantInc: 333334 * time.Microsecond, wantCap: 3333334 * time.Microsecond},
		{name: "empty body is one byte", bps: 1000, burst: 1000, body: 0, wantInc: time.Millisecond, wantCap: time.Second},
		{name: "body of burst bytes fills the bucket", bps: 3, burst: 10, body: 10, wantInc: 3333334 * time.Microsecond, wantCap: 3333334 * time.Microsecond},
		{name: "body over burst", bps: 1000, burst: 1000, body: 1001, wantInc: 1001 * time.Millisecond, wantCap: time.Second},
		{name: "10 MB/s, 64 KiB body", bps: 10_000_000, burst: 10 * mib, body: 64 * kib, wantInc: 6554 * time.Microsecond, wantCap: 1048576 * time.Microsecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inc, capacity, err := gcra.ByteRate(tt.bps, tt.burst, tt.body)
			if err != nil {
				t.Fatalf("ByteRate(%d, %d, %d): %v", tt.bps, tt.burst, tt.body, err)
			}
			if inc != tt.wantInc || capacity != tt.wantCap {
				t.Fatalf("ByteRate(%d, %d, %d) = %v, %v, want %v, %v", tt.bps, tt.burst, tt.body, inc, capacity, tt.wantInc, tt.wantCap)
			}
		})
	}
}

func TestByteRateErrors(t *testing.T) {
	tests := []struct {
		name             string
		bps, burst, body int64
	}{
		{name: "zero rate", bps: 0, burst: 1, body: 1},
		{name: "negative rate", bps: -1, burst: 1, body: 1},
		{name: "zero burst", bps: 1, burst: 0, body: 1},
		{name: "negative burst", bps: 1, burst: -1, body: 1},
		{name: "negative body", bps: 1, burst: 1, body: -1},
		{name: "capacity over 366 days", bps: 1, burst: 366*24*3600 + 1, body: 1},
		{name: "huge burst", bps: 1, burst: math.MaxInt64, body: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inc, capacity, err := gcra.ByteRate(tt.bps, tt.burst, tt.body)
			if !errors.Is(err, gcra.ErrRate) {
				t.Fatalf("ByteRate(%d, %d, %d) = %v, %v, %v, want ErrRate", tt.bps, tt.burst, tt.body, inc, capacity, err)
			}
		})
	}
	// Exactly 366 days of burst is allowed.
	if _, c, err := gcra.ByteRate(1, 366*24*3600, 1); err != nil || c != gcra.MaxCapacity {
		t.Errorf("ByteRate(1, 366 days of bytes, 1) = %v, %v, want MaxCapacity, nil", c, err)
	}
}

// TestByteRateBurstBody: for random rates up to 100 MB/s, a body of
// exactly burst bytes has increment == capacity: it conforms on a full
// bucket.
func TestByteRateBurstBody(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(2, seed))
	for i := 0; i < 2000; i++ {
		bps := 1 + rng.Int64N(100_000_000)
		burst := 1 + rng.Int64N(16<<20)
		if burst*1_000_000/bps > int64(gcra.MaxCapacity/time.Microsecond) {
			continue
		}
		inc, capacity, err := gcra.ByteRate(bps, burst, burst)
		if err != nil {
			t.Fatalf("ByteRate(%d, %d, %d): %v", bps, burst, burst, err)
		}
		if inc != capacity {
			t.Fatalf("ByteRate(%d, %d, burst): increment %v != capacity %v", bps, burst, inc, capacity)
		}
		if d := gcra.Charge(epoch, 0, inc.Microseconds(), capacity.Microseconds()); !d.Conform {
			t.Fatalf("ByteRate(%d, %d, burst): denied on a full bucket", bps, burst)
		}
	}
}

// TestByteRateOverBurst: a body one byte over the burst has increment >
// capacity, as ByteRate documents (it can never conform: ErrOverCapacity
// at the Store). Rates run up to 100 MB/s, beyond one byte per µs, where
// one byte is less than the 1µs rounding.
func TestByteRateOverBurst(t *testing.T) {
	check := func(bps, burst int64) {
		t.Helper()
		inc, capacity, err := gcra.ByteRate(bps, burst, burst+1)
		if err != nil {
			t.Fatalf("ByteRate(%d, %d, %d): %v", bps, burst, burst+1, err)
		}
		if inc <= capacity {
			t.Fatalf("ByteRate(%d, %d, burst+1) = %v, %v: increment <= capacity, a body over the burst conforms", bps, burst, inc, capacity)
		}
	}
	check(1000, 1000)
	check(3, 10)
	check(1_000_000, 1<<20)
	check(10_000_000, 1<<20) // 10 MB/s, 1 MiB burst: 0.1µs per byte
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(3, seed))
	for i := 0; i < 2000; i++ {
		bps := 1 + rng.Int64N(100_000_000)
		burst := 1 + rng.Int64N(16<<20)
		if burst*1_000_000/bps > int64(gcra.MaxCapacity/time.Microsecond) {
			continue
		}
		check(bps, burst)
	}
}
