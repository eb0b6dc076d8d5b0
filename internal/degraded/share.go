package degraded

import (
	"math"
	"math/bits"
	"time"

	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/gcra"
)

// Share is this node's share of the fleet's limit, num/den of it: 1/N for
// a fleet of N nodes, or an explicit fraction in parts per million. The
// local store charges every bucket at that share of its rate and burst
// (CONTRACT §8).
type Share struct {
	num, den uint64 // 0 < num ≤ den
}

// OfNodes is 1/n of the fleet's limit, n ≥ 1.
func OfNodes(n int) Share { return Share{num: 1, den: uint64(n)} }

// OfFraction is f of the fleet's limit, rounded to parts per million,
// down: a share rounded up could admit more than the fleet's limit. ok is
// false when f rounds to 0 or is not in (0, 1].
func OfFraction(f float64) (s Share, ok bool) {
	if !(f > 0 && f <= 1) {
		return Share{}, false
	}
	// f·1e6 of a share given in ppm can come out a hair under the whole
	// number (1e-6·1e6 < 1 in floating point): allow for that, no more.
	ppm := uint64(math.Floor(f*1e6 + 1e-6))
	if ppm < 1 {
		return Share{}, false
	}
	return Share{num: ppm, den: 1e6}, true
}

// Charge returns c as this node charges it while degraded. With a share
// s = num/den of a fleet limit of emission interval I and capacity C:
//
//	I' = ceil(I / s)      the rate times s, rounded down (whole µs)
//	C' = max(C, I')       the burst times s (B·s charges of I' is C),
//	                      but never less than one charge
//
// so that the burst B = C/I becomes B·s = C/I' charges, at least one. I'
// is capped at 366 days (the largest capacity, G6): a bucket that slow
// admits one charge a year either way.
//
// A quota's window charge (CONTRACT §3.2) is returned as it is: the local
// store counts it against the fleet's whole max.
func (s Share) Charge(c driver.Charge) driver.Charge {
	if c.IsWindow() {
		return c
	}
	const maxUS = uint64(gcra.MaxCapacity / time.Microsecond)
	us := uint64(c.Increment / time.Microsecond)
	hi, lo := bits.Mul64(us, s.den)
	var inc uint64
	if hi >= s.num { // the quotient would not fit 64 bits
		inc = maxUS
	} else {
		q, r := bits.Div64(hi, lo, s.num)
		if r != 0 && q < maxUS {
			q++
		}
		inc = min(q, maxUS)
	}
	c.Increment = time.Duration(inc) * time.Microsecond
	if !c.Shadow { // a shadow charge is read against its own capacity
		c.Capacity = max(c.Capacity, c.Increment)
	}
	return c
}

// Fraction is s as a fraction of the fleet's limit (for log lines).
func (s Share) Fraction() float64 { return float64(s.num) / float64(s.den) }
