package gcra

import (
	"errors"
	"math"
	"math/bits"
	"time"
)

// MaxCapacity is the largest capacity the helpers return and the Store
// accepts: 366 days. It keeps every TAT (now + capacity, ≈ 1.8e15 µs today)
// well inside the 2^53 µs that a Lua number holds exactly.
const MaxCapacity = 366 * 24 * time.Hour

// ErrRate is returned by the helpers for a non-positive rate or burst, or a
// result above MaxCapacity.
var ErrRate = errors.New("gcra: rate out of range")

// Rate returns the increment and capacity of a one-unit charge for a limit of
// n events per period with a burst of burst events: increment = period / n,
// rounded up to the microsecond (a limit is never looser than asked),
// capacity = increment × burst. Exactly burst back-to-back charges conform on
// a full bucket (G1).
func Rate(n int64, period time.Duration, burst int64) (increment, capacity time.Duration,
	err error) {
	if n <= 0 || period < time.Microsecond || burst <= 0 {
		return 0, 0, ErrRate
	}
	// ceil(ceil(period_ns / n) / 1000) = ceil(period_ns / (n·1000)): the
	// increment is never shorter than asked, even for sub-µs remainders.
	incUS := ceilDiv(ceilDiv(uint64(period), 1, uint64(n)), 1, uint64(time.Microsecond))
	capUS, ok := mulU(incUS, uint64(burst))
	if !ok || capUS > uint64(MaxCapacity/time.Microsecond) {
		return 0, 0, ErrRate
	}
	return time.Duration(incUS) * time.Microsecond, time.Duration(capUS) * time.Microsecond, nil
}

// ByteRate returns the increment and capacity of a charge of bodySize bytes
// against a limit of bytesPerSecond with a burst of burstBytes: both are
// bytes × 1s / bytesPerSecond rounded up to the microsecond, with the same
// rounding, so a body of exactly burstBytes conforms on a full bucket and a
// larger one has increment > capacity (ErrOverCapacity at the Store).
// A bodySize of 0 is charged as 1 byte (the increment must be ≥ 1µs).
func ByteRate(bytesPerSecond, burstBytes, bodySize int64) (increment, capacity time.Duration,
	err error) {
	if bytesPerSecond <= 0 || burstBytes <= 0 || bodySize < 0 {
		return 0, 0, ErrRate
	}
	bodySize = max(bodySize, 1)
	const usPerSecond = uint64(time.Second / time.Microsecond)
	capUS := ceilDiv(uint64(burstBytes), usPerSecond, uint64(bytesPerSecond))
	incUS := ceilDiv(uint64(bodySize), usPerSecond, uint64(bytesPerSecond))
	if capUS > uint64(MaxCapacity/time.Microsecond) {
		return 0, 0, ErrRate
	}
	if bodySize > burstBytes {
		// Rounding up may make both equal; a body over the burst must never
		// conform.
		incUS = max(incUS, capUS+1)
	}
	if incUS > uint64(math.MaxInt64/int64(time.Microsecond)) {
		incUS = uint64(math.MaxInt64 / int64(time.Microsecond))
	}
	return time.Duration(incUS) * time.Microsecond, time.Duration(capUS) * time.Microsecond, nil
}

// ceilDiv returns ceil(a×b / d) without overflow in the product, saturating
// at MaxUint64/2.
func ceilDiv(a, b, d uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	if hi >= d {
		return math.MaxUint64 / 2
	}
	q, r := bits.Div64(hi, lo, d)
	if r != 0 {
		q++
	}
	return min(q, math.MaxUint64/2)
}

func mulU(a, b uint64) (uint64, bool) {
	hi, lo := bits.Mul64(a, b)
	return lo, hi == 0 && lo <= math.MaxInt64
}
