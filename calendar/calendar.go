// Package calendar is the calendar arithmetic of a quota (CONTRACT §3.2):
// the day, ISO week or month that holds an instant in a time zone, as the
// instants where it starts and ends. Pure functions, no clock. The Store
// sends a store only the edges of three consecutive windows in µs since
// the Unix epoch (Edges), so that no script needs time-zone code.
//
// A window starts at the first instant whose date in the zone is its first
// day, and ends where the next one starts. So a day is 23 hours long on
// the day summer time starts and 25 on the day it ends, February is 28 or
// 29 days, and a day whose midnight a zone skips starts at the end of the
// gap (01:00 in America/Sao_Paulo on 4 November 2018).
package calendar

import (
	"fmt"
	"time"
)

// Period is the length of a quota's window: Day, Week or Month.
type Period int

// The periods of a quota.
const (
	// Day: from midnight to midnight.
	Day Period = iota + 1
	// Week: an ISO 8601 week, from Monday 00:00 to the next Monday 00:00.
	Week
	// Month: from the first of the month 00:00 to the first of the next.
	Month
)

// Valid reports whether p is Day, Week or Month.
func (p Period) Valid() bool { return p >= Day && p <= Month }

// String returns "day", "week" or "month".
func (p Period) String() string {
	switch p {
	case Day:
		return "day"
	case Week:
		return "week"
	case Month:
		return "month"
	}
	return fmt.Sprintf("Period(%d)", int(p))
}

// ParsePeriod returns the period named s: "day", "week" or "month".
func ParsePeriod(s string) (Period, error) {
	for p := Day; p <= Month; p++ {
		if s == p.String() {
			return p, nil
		}
	}
	return 0, fmt.Errorf("calendar: no period %q (want day, week or month)", s)
}

// Window returns the window of period p that holds t in loc (nil: UTC):
// start ≤ t < end. An invalid p returns two zero times.
func Window(p Period, loc *time.Location, t time.Time) (start, end time.Time) {
	if !p.Valid() {
		return time.Time{}, time.Time{}
	}
	if loc == nil {
		loc = time.UTC
	}
	first := p.first(civilOf(t.In(loc)))
	return dayStart(first, loc), dayStart(p.next(first), loc)
}

// Edges returns the edges of three consecutive windows of period p in loc
// (nil: UTC), in µs since the Unix epoch: [e[0], e[1]) the window before
// the one holding t, [e[1], e[2]) the one holding t, [e[2], e[3]) the next
// (driver.Window.Edges). They are strictly ascending. An invalid p
// returns zero edges.
func Edges(p Period, loc *time.Location, t time.Time) [4]int64 {
	var e [4]int64
	if !p.Valid() {
		return e
	}
	if loc == nil {
		loc = time.UTC
	}
	first := p.first(civilOf(t.In(loc)))
	e[1] = dayStart(first, loc).UnixMicro()
	// A whole day can be skipped (Pacific/Apia skipped 30 December
	// 2011): the window before or after is then the next one that lasts.
	before, after := first, p.next(first)
	e[2] = dayStart(after, loc).UnixMicro()
	for e[0] = e[1]; e[0] >= e[1]; {
		before = p.prev(before)
		e[0] = dayStart(before, loc).UnixMicro()
	}
	for e[3] = e[2]; e[3] <= e[2]; {
		after = p.next(after)
		e[3] = dayStart(after, loc).UnixMicro()
	}
	return e
}

// civil is a date in no zone.
type civil struct {
	y int
	m time.Month
	d int
}

func civilOf(t time.Time) civil {
	y, m, d := t.Date()
	return civil{y, m, d}
}

// add returns c moved by months and days, normalised as time.Date does.
func (c civil) add(months, days int) civil {
	return civilOf(time.Date(c.y, c.m+time.Month(months), c.d+days, 12, 0, 0, 0, time.UTC))
}

// before reports whether c is an earlier date than o.
func (c civil) before(o civil) bool {
	if c.y != o.y {
		return c.y < o.y
	}
	if c.m != o.m {
		return c.m < o.m
	}
	return c.d < o.d
}

// first returns the first day of p's window holding the date c.
func (p Period) first(c civil) civil {
	switch p {
	case Week:
		wd := time.Date(c.y, c.m, c.d, 12, 0, 0, 0, time.UTC).Weekday()
		return c.add(0, -(int(wd)+6)%7) // Monday is 0
	case Month:
		return civil{c.y, c.m, 1}
	}
	return c
}

// next returns the first day of the window after the one starting on c.
func (p Period) next(c civil) civil {
	switch p {
	case Week:
		return c.add(0, 7)
	case Month:
		return c.add(1, 0)
	}
	return c.add(0, 1)
}

// prev returns the first day of the window before the one starting on c.
func (p Period) prev(c civil) civil {
	switch p {
	case Week:
		return c.add(0, -7)
	case Month:
		return c.add(-1, 0)
	}
	return c.add(0, -1)
}

// dayStart returns the first instant whose date in loc is c or later.
// time.Date gives it unless a zone transition is near midnight: it may
// land on the day before when midnight is skipped, so the answer is
// checked and searched for when it is wrong.
func dayStart(c civil, loc *time.Location) time.Time {
	t := time.Date(c.y, c.m, c.d, 0, 0, 0, 0, loc)
	if !civilOf(t).before(c) && civilOf(t.Add(-time.Second)).before(c) {
		return t
	}
	// Offsets lie within ±26h of UTC (tzdata's are within −12h and
	// +14h): the first instant of the day lies in that span around its
	// midnight in UTC. Dates in loc only grow with time there, so a
	// binary search over whole seconds finds it (transitions are on
	// whole seconds).
	utc := time.Date(c.y, c.m, c.d, 0, 0, 0, 0, time.UTC).Unix()
	lo, hi := utc-26*3600, utc+26*3600 // the date at lo is before c; at hi it is not
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if civilOf(time.Unix(mid, 0).In(loc)).before(c) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return time.Unix(hi, 0).In(loc)
}

// Holding returns which of the three windows bounded by edges (Edges)
// holds now, in µs: 0, 1 or 2 for [e[0], e[1]), [e[1], e[2]) or
// [e[2], e[3]), −1 for none. A store counts a quota's charge in that
// window, by its own clock (CONTRACT §3.2).
func Holding(e [4]int64, now int64) int {
	for k := range 3 {
		if e[k] <= now && now < e[k+1] {
			return k
		}
	}
	return -1
}
