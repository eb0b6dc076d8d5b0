package fleetstore

import (
	"fmt"
	"strconv"
	"time"

	"github.com/fleetstore/fleetstore/calendar"
	"github.com/fleetstore/fleetstore/driver"
)

// MaxQuota is the largest n of a quota (NewQuota, NewByteQuota): 2^50
// units, so that a window's count stays exact in every store.
const MaxQuota = driver.MaxWindowUnits

// NewQuota returns the calendar quota of n units per period in loc (nil:
// UTC), charged to the windows of kind: "10 000 hooks a month". A window
// is a day, an ISO week (from Monday) or a month of loc's calendar
// (package calendar), and its count starts over at its end. A quota is a
// Limit: a Plan charges it in the same Hit as its rate limits, all or
// nothing (CONTRACT §3.2, Q1–Q6), a charge of c units conforming while the
// window's count plus c is at most n. Give it a kind of its own
// ("hooks_month"): the kind names its windows in the store. A Result's
// state of it (Result.Quota) holds the window's count, Bucket.Used;
// Remaining and Resets turn it into the units left and the window's end.
//
// Errors (ErrInvalid, naming the argument): a kind that is no Kind, n < 1
// or n > MaxQuota, a period that is not calendar.Day, Week or Month.
func NewQuota(kind Kind, n int64, period calendar.Period, loc *time.Location) (Limit, error) {
	return newQuota(kind, "n", n, period, loc, false)
}

// NewByteQuota returns the calendar quota of n body bytes per period in
// loc (nil: UTC), charged to the windows of kind: a delivery is charged
// its body's length (Plan.Charges). A body larger than n never conforms
// (ErrOverCapacity at Hit, G6). Errors as NewQuota's, the argument named
// "bytes".
func NewByteQuota(kind Kind, n int64, period calendar.Period, loc *time.Location) (Limit, error) {
	return newQuota(kind, "bytes", n, period, loc, true)
}

func newQuota(kind Kind, field string, n int64, period calendar.Period, loc *time.Location,
	bytes bool) (Limit, error) {
	if why := kindReason(kind); why != "" {
		return Limit{}, limitErr("kind", why)
	}
	if n < 1 || n > MaxQuota {
		return Limit{}, limitErr(field, fmt.Sprintf("must be 1 to %d, got %d", int64(MaxQuota), n))
	}
	if !period.Valid() {
		return Limit{}, limitErr("period", "must be calendar.Day, Week or Month, got "+
			strconv.Itoa(int(period)))
	}
	if loc == nil {
		loc = time.UTC
	}
	return Limit{kind: kind, n: n, burst: n, bytes: bytes, calendar: period, loc: loc}, nil
}

// IsQuota reports whether l is a calendar quota (NewQuota, NewByteQuota).
func (l Limit) IsQuota() bool { return l.calendar != 0 }

// Period is a quota's window: calendar.Day, Week or Month; 0 for a rate
// limit.
func (l Limit) Period() calendar.Period { return l.calendar }

// Location is the zone of a quota's calendar; nil for a rate limit.
func (l Limit) Location() *time.Location { return l.loc }

// quotaCharge is the window charge of cost units at now (Limit.ChargeAt).
func (l Limit) quotaCharge(tenant string, cost int64, now time.Time) Charge {
	// A cost over MaxQuota is sent as MaxQuota + 1, which no quota
	// admits: ErrOverCapacity at Hit, as any cost over n.
	cost = min(max(cost, 1), MaxQuota+1)
	return Charge{Kind: l.kind, Tenant: tenant, Shadow: l.shadow, Window: driver.Window{
		Max: l.n, Cost: cost, Edges: calendar.Edges(l.calendar, l.loc, now)}}
}

// Resets returns the instant b's window starts over, b being the state of
// this limit's bucket in a Result read at now: for a quota, the calendar
// boundary now + b.ResetAfter is (the nearest one: the store's clock may
// differ from this node's by seconds), for a rate limit now +
// b.ResetAfter, when its bucket is full again.
func (l Limit) Resets(b Bucket, now time.Time) time.Time {
	at := now.Add(b.ResetAfter)
	if !l.IsQuota() {
		return at
	}
	start, end := calendar.Window(l.calendar, l.loc, at)
	if at.Sub(start) < end.Sub(at) {
		return start
	}
	return end
}

// quotaString is String of a quota: "hooks_month: 10000 per month
// (Europe/Berlin)".
func (l Limit) quotaString() string {
	unit := ""
	if l.bytes {
		unit = " bytes"
	}
	shadow := ""
	if l.shadow {
		shadow = " (shadow)"
	}
	return fmt.Sprintf("%s: %d%s per %v (%s)%s", l.kind, l.n, unit, l.calendar, l.loc, shadow)
}
