package fleetstore

import (
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"time"

	"github.com/fleetstore/fleetstore/calendar"
	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/gcra"
	"github.com/fleetstore/fleetstore/internal/fault"
)

// Limit is one bucket's rate limit in the caller's units, built once at
// start-up: "100 hooks per second, burst 200" (NewLimit, PerSecond) or "1
// MiB of body per second, burst 8 MiB" (NewByteLimit). It yields the
// Charge of a cost for a tenant (Charge) and turns a bucket's state after
// a Hit back into units (Remaining), so that no request computes a rate or
// drops an error. Package gcra is the arithmetic underneath (gcra.Rate,
// gcra.ByteRate). A calendar quota, "10 000 hooks a month"
// (NewQuota, NewByteQuota), is a Limit too, charged in the same Hit. A
// Limit is a small comparable value, safe to share; the zero Limit is
// invalid (its charges are ErrInvalid at Hit).
type Limit struct {
	kind     Kind
	n        int64         // units per period
	period   time.Duration // whole µs
	burst    int64         // units
	unit     time.Duration // a unit limit: the increment of one unit (whole µs)
	bytes    bool          // a byte limit: increments rounded up per charge, not per unit
	capacity time.Duration // the burst capacity (whole µs)
	shadow   bool          // charged, reported, never denying (Shadow)

	// A calendar quota (NewQuota) has n, burst = n, bytes and these two,
	// and no period, unit or capacity.
	calendar calendar.Period // 0 for a rate limit
	loc      *time.Location  // the quota's zone
}

// NewLimit returns the limit of n units per period with a burst of burst
// units, charged to the buckets of kind: one unit's emission interval is
// period / n rounded up to the µs (a limit is never looser than asked),
// its capacity that interval × burst, so exactly burst back-to-back
// one-unit charges conform on a full bucket (G1), and a charge of cost c
// has increment c × the interval.
//
// Errors (ErrInvalid, naming the argument): a kind that is no Kind
// ([a-z][a-z0-9_]{0,31}), n < 1, a period under 1µs, burst < 1, or a
// capacity above 366 days.
func NewLimit(kind Kind, n int64, period time.Duration, burst int64) (Limit, error) {
	if err := checkLimit(kind, n, period, burst); err != nil {
		return Limit{}, err
	}
	unit, capacity, err := gcra.Rate(n, period, burst)
	if err != nil {
		us := period.Microseconds()
		interval := us / n // rounded up, at least 1µs
		if interval == 0 || us%n != 0 {
			interval++
		}
		return Limit{}, limitErr("burst", fmt.Sprintf("%d × the emission interval %v (%v / %d, "+
			"rounded up to the µs) is over 366 days", burst, time.Duration(interval)*time.Microsecond,
			period, n))
	}
	return Limit{kind: kind, n: n, period: period.Truncate(time.Microsecond), burst: burst,
		unit: unit, capacity: capacity}, nil
}

// PerSecond is NewLimit(kind, n, time.Second, burst): n units a second,
// burst units at once.
func PerSecond(kind Kind, n, burst int64) (Limit, error) {
	return NewLimit(kind, n, time.Second, burst)
}

// NewByteLimit returns the limit of bytesPerSecond bytes a second with a
// burst of burstBytes, charged to the buckets of kind (Bytes, usually): a
// charge of c bytes has increment c × 1s / bytesPerSecond rounded up to
// the µs (gcra.ByteRate), the capacity burstBytes × 1s / bytesPerSecond
// rounded up, so a body of burstBytes conforms on a full bucket and a
// larger one never does (ErrOverCapacity at Hit, G6).
//
// Errors (ErrInvalid, naming the argument): a kind that is no Kind,
// bytesPerSecond < 1, burstBytes < 1, or a capacity above 366 days.
func NewByteLimit(kind Kind, bytesPerSecond, burstBytes int64) (Limit, error) {
	if why := kindReason(kind); why != "" {
		return Limit{}, limitErr("kind", why)
	}
	if bytesPerSecond < 1 {
		return Limit{}, limitErr("bytes_per_second",
			"must be at least 1, got "+strconv.FormatInt(bytesPerSecond, 10))
	}
	if burstBytes < 1 {
		return Limit{}, limitErr("burst_bytes",
			"must be at least 1, got "+strconv.FormatInt(burstBytes, 10))
	}
	_, capacity, err := gcra.ByteRate(bytesPerSecond, burstBytes, burstBytes)
	if err != nil || capacity < time.Microsecond {
		return Limit{}, limitErr("burst_bytes",
			fmt.Sprintf("%d bytes at %d bytes/s is over 366 days", burstBytes, bytesPerSecond))
	}
	return Limit{kind: kind, n: bytesPerSecond, period: time.Second, burst: burstBytes,
		bytes: true, capacity: capacity}, nil
}

// MustLimit returns l, and panics if err is not nil: for limits declared
// as package variables, whose arguments are constants
// (fleetstore.MustLimit(fleetstore.PerSecond(fleetstore.Hooks, 100, 200))).
func MustLimit(l Limit, err error) Limit {
	if err != nil {
		panic(err)
	}
	return l
}

func checkLimit(kind Kind, n int64, period time.Duration, burst int64) error {
	if why := kindReason(kind); why != "" {
		return limitErr("kind", why)
	}
	if n < 1 {
		return limitErr("n", "must be at least 1, got "+strconv.FormatInt(n, 10))
	}
	if period < time.Microsecond {
		return limitErr("period", fmt.Sprintf("must be at least 1µs, got %v", period))
	}
	if burst < 1 {
		return limitErr("burst", "must be at least 1, got "+strconv.FormatInt(burst, 10))
	}
	return nil
}

// valid reports whether l was built by a constructor: the zero Limit is
// not (every rate limit has a capacity of at least 1µs, every quota a
// period; Shadow keeps both).
func (l Limit) valid() bool { return l.capacity > 0 || l.calendar != 0 }

func limitErr(field, why string) error {
	return fault.New("limit", driver.Invalid(field, why))
}

// Shadow returns l as a shadow limit (CONTRACT §1.2): charged whenever the
// Hit's other charges are and reported in Result.Quota (Bucket.Shadow;
// Bucket.Denied when it would have denied), but never denying, never in
// the Hit's retry-after, never ErrOverCapacity, and left out of package
// headers' fields: a new or smaller limit rolled out to be watched before
// it refuses anyone. It is charged also when it would have denied, so it
// counts the traffic over the limit: after a burst its bucket is in debt
// and reports Denied until the debt is paid, a little longer than the
// limit enforced would refuse. It charges the buckets of its own kind, so
// give it a kind no other limit of the Hit has (e.g. "hooks_next").
// A shadow quota counts every charge of its Hits, even those over n, and
// its bucket reports Denied once its count is over n.
func (l Limit) Shadow() Limit {
	l.shadow = true
	return l
}

// IsShadow reports whether l is a shadow limit (Shadow).
func (l Limit) IsShadow() bool { return l.shadow }

// Kind is the kind of the buckets the limit charges.
func (l Limit) Kind() Kind { return l.kind }

// Burst is the limit's burst in its units: hooks, or bytes for a byte
// limit; a quota's n. It is the q of the limit's RateLimit-Policy.
func (l Limit) Burst() int64 { return l.burst }

// Capacity is the limit's burst capacity (whole µs): how long an empty
// bucket takes to fill again. It is a Charge's Capacity; 0 for a quota.
func (l Limit) Capacity() time.Duration { return l.capacity }

// InBytes reports whether l is a byte limit (NewByteLimit) or a byte
// quota (NewByteQuota): its units are content bytes, and a delivery's
// cost is its body's length.
func (l Limit) InBytes() bool { return l.bytes }

// Charge returns the charge of cost units (hooks, or bytes for a byte
// limit) to tenant's bucket of the limit's kind. A cost below 1 is charged
// as 1 (every charge takes at least 1µs); one so large that its increment
// overflows is charged the largest increment, which never conforms
// (ErrOverCapacity at Hit, G6), as any cost over the burst.
//
// A quota's charge is a window charge (Charge.Window, CONTRACT §3.2):
// cost units against its n, with the edges of the calendar windows
// around time.Now (ChargeAt).
func (l Limit) Charge(tenant string, cost int64) Charge {
	if l.calendar != 0 {
		return l.quotaCharge(tenant, cost, time.Now())
	}
	return l.ChargeAt(tenant, cost, time.Time{})
}

// ChargeAt is Charge with this node's clock reading now: a quota's
// windows are those around now (the store counts in the one holding its
// own clock, which may differ by up to a window). A rate limit's charge
// does not depend on now.
func (l Limit) ChargeAt(tenant string, cost int64, now time.Time) Charge {
	if l.calendar != 0 {
		return l.quotaCharge(tenant, cost, now)
	}
	c := Charge{Kind: l.kind, Tenant: tenant, Capacity: l.capacity, Shadow: l.shadow}
	cost = max(cost, 1)
	if l.bytes {
		c.Increment, _, _ = gcra.ByteRate(l.n, l.burst, cost) // arguments checked by NewByteLimit
		return c
	}
	us := uint64(l.unit / time.Microsecond)
	hi, lo := bits.Mul64(us, uint64(cost))
	if hi != 0 || lo > math.MaxInt64/uint64(time.Microsecond) {
		lo = math.MaxInt64 / uint64(time.Microsecond)
	}
	c.Increment = time.Duration(lo) * time.Microsecond
	return c
}

// Remaining turns b, the state of a bucket of this limit after a Hit
// (Result.Quota, G10), into the units left: hooks, or bytes for a byte
// limit, rounded down and at most the burst, so that it never over-states
// what is left: a charge of Remaining(b) units conforms now, one more unit
// does not. (A byte limit's capacity is rounded up to the µs, so a full
// bucket's headroom holds a little more than the burst; a charge over the
// burst never conforms, G6, so the burst is what is left.)
//
// For a quota it is n minus the window's count, b.Used, at least 0.
func (l Limit) Remaining(b Bucket) int64 {
	if l.calendar != 0 {
		return max(l.n-b.Used, 0)
	}
	h := uint64(max(b.Headroom, 0) / time.Microsecond)
	if !l.bytes {
		if l.unit <= 0 {
			return 0
		}
		return min(int64(h/uint64(l.unit/time.Microsecond)), l.burst)
	}
	// floor(h × bytes/s / 1e6): c × 1e6 / rate ≤ h for c ≤ that, and the
	// increment, its ceiling, still fits h (whole µs).
	hi, lo := bits.Mul64(h, uint64(l.n))
	const usPerSecond = uint64(time.Second / time.Microsecond)
	if hi >= usPerSecond {
		return l.burst
	}
	q, _ := bits.Div64(hi, lo, usPerSecond)
	return int64(min(q, uint64(l.burst)))
}

// String describes the limit: "hooks: 100 per 1s, burst 200", "bytes:
// 1048576 bytes per 1s, burst 8388608", "hooks_month: 10000 per month
// (UTC)".
func (l Limit) String() string {
	if l.calendar != 0 {
		return l.quotaString()
	}
	shadow := ""
	if l.shadow {
		shadow = " (shadow)"
	}
	if l.bytes {
		return fmt.Sprintf("%s: %d bytes per %v, burst %d%s", l.kind, l.n, l.period, l.burst, shadow)
	}
	return fmt.Sprintf("%s: %d per %v, burst %d%s", l.kind, l.n, l.period, l.burst, shadow)
}
