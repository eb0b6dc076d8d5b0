package memcached

import "math"

// maxRelative is the largest exptime memcached reads as seconds from now:
// 30 days. A larger one is a Unix time.
const maxRelative = 30 * 24 * 3600 // 2 592 000 s

// expiration returns the exptime that keeps an item written at now alive
// until expires (both µs, client wall clock), and not much longer.
//
// Memcached counts whole seconds on a clock that ticks once a second, so an
// item given n seconds lives between n-1 and n seconds. The exptime is
// therefore the time left rounded up, plus one second: the item never goes
// early and lingers less than 2s. Above 30 days it is the absolute Unix time
// expires/1s rounded up plus one (client clock: see the package doc on
// skew), clamped to 2038-01-19, the last time an int32 holds. It is never 0,
// which memcached reads as "never expires".
func expiration(now, expires int64) int32 {
	rel := ceilSeconds(expires-now) + 1
	if rel < 1 {
		rel = 1
	}
	if rel <= maxRelative {
		return int32(rel)
	}
	return int32(min(ceilSeconds(expires)+1, math.MaxInt32))
}

// ceilSeconds returns us µs in whole seconds, rounded up.
func ceilSeconds(us int64) int64 {
	s := us / 1e6
	if us%1e6 > 0 {
		s++
	}
	return s
}
