package headers_test

import (
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
	_ "time/tzdata" // Europe/Berlin, whatever the machine has installed

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/calendar"
	"github.com/fleetstore/fleetstore/headers"
)

// quotaFields hits st at the instant the memory clock now holds, charging
// each limit one unit with ChargeAt, and returns the fields Write sets on
// that clock.
func quotaFields(t *testing.T, st *fleetstore.Store, now *atomic.Int64, limits []fleetstore.Limit) (
	fleetstore.Result, http.Header) {
	t.Helper()
	at := time.UnixMicro(now.Load())
	charges := make([]fleetstore.Charge, len(limits))
	for i, l := range limits {
		charges[i] = l.ChargeAt("acme", 1, at)
	}
	res := hit(t, st, charges...)
	h := http.Header{}
	headers.Write(h, &res, limits, headers.Options{Legacy: true, Now: func() time.Time { return at }})
	return res, h
}

func setClock(now *atomic.Int64, at time.Time) { now.Store(at.UnixMicro()) }

// TestQuotaDraftExample: a rate limit and a daily quota are two policies
// of one list, in the form of the draft's own example of several
// policies (draft-ietf-httpapi-ratelimit-headers-10, §3:
// `RateLimit-Policy: "burst";q=100;w=60,"daily";q=1000;w=86400`; we
// write ", " between members, as RFC 9651 §4.1.1 serializes a List).
// The quota's q is its n, w the day's 86 400 seconds, r what is left of
// n and t the seconds to midnight, when the count starts over.
func TestQuotaDraftExample(t *testing.T) {
	st, now := clockStore(t)
	setClock(now, time.Date(2027, 6, 15, 18, 0, 0, 0, time.UTC))
	burst := fleetstore.MustLimit(fleetstore.NewLimit("burst", 100, time.Minute, 100))
	daily := fleetstore.MustLimit(fleetstore.NewQuota("daily", 1000, calendar.Day, nil))
	_, h := quotaFields(t, st, now, []fleetstore.Limit{burst, daily})
	wantFields(t, "the first request of the day at 18:00", h, map[string]string{
		"RateLimit-Policy": `"burst";q=100;w=60, "daily";q=1000;w=86400`,
		"RateLimit":        `"burst";r=99;t=1, "daily";r=999;t=21600`,
		// The burst has the smaller share left: 99 of 100, 999 of 1000.
		"X-RateLimit-Limit": "100", "X-RateLimit-Remaining": "99", "X-RateLimit-Reset": "1",
	})
}

// TestQuotaMonth: a monthly quota of 3 hooks beside 10 a second, from
// 27 February 2027 12:00 UTC (a 28-day month): r counts 2, 1, 0 with t
// the 36 hours to 1 March; the 4th is denied with a Retry-After of those
// 36 hours, no earlier than t (§6), and the quota named in the legacy
// fields as the limit that denied. On 1 March the count starts over in a
// 31-day window; in a leap February, w is 29 days.
func TestQuotaMonth(t *testing.T) {
	st, now := clockStore(t)
	hooks := fleetstore.MustLimit(fleetstore.PerSecond(fleetstore.Hooks, 10, 10))
	month := fleetstore.MustLimit(fleetstore.NewQuota("hooks_month", 3, calendar.Month, nil))
	limits := []fleetstore.Limit{hooks, month}
	start := time.Date(2027, 2, 27, 12, 0, 0, 0, time.UTC)
	setClock(now, start)
	const feb, mar = 28 * 86400, 31 * 86400
	left := strconv.Itoa(36 * 3600)
	policy := `"hooks";q=10;w=1, "hooks_month";q=3;w=` + strconv.Itoa(feb)
	for i, r := range []string{"2", "1", "0"} {
		_, h := quotaFields(t, st, now, limits)
		wantFields(t, "hook "+strconv.Itoa(i+1), h, map[string]string{
			"RateLimit-Policy":  policy,
			"RateLimit":         `"hooks";r=` + strconv.Itoa(9-i) + `;t=1, "hooks_month";r=` + r + `;t=` + left,
			"X-RateLimit-Limit": "3", "X-RateLimit-Remaining": r, "X-RateLimit-Reset": left,
		})
	}
	res, h := quotaFields(t, st, now, limits)
	if res.Outcome != fleetstore.RateLimited {
		t.Fatalf("the 4th hook of the month: %v, want rate_limited", res.Outcome)
	}
	wantFields(t, "the 4th hook (denied by the quota)", h, map[string]string{
		"Retry-After":       left,
		"RateLimit-Policy":  policy,
		"RateLimit":         `"hooks";r=7;t=1, "hooks_month";r=0;t=` + left,
		"X-RateLimit-Limit": "3", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": left,
	})

	setClock(now, time.Date(2027, 3, 1, 0, 0, 1, 0, time.UTC))
	_, h = quotaFields(t, st, now, limits)
	if want := `"hooks";q=10;w=1, "hooks_month";q=3;w=` + strconv.Itoa(mar); h.Get("RateLimit-Policy") != want {
		t.Errorf("1 March: RateLimit-Policy %q, want %q", h.Get("RateLimit-Policy"), want)
	}
	if want := `"hooks";r=9;t=1, "hooks_month";r=2;t=` + strconv.Itoa(mar-1); h.Get("RateLimit") != want {
		t.Errorf("1 March: RateLimit %q, want %q", h.Get("RateLimit"), want)
	}

	setClock(now, time.Date(2028, 2, 10, 0, 0, 0, 0, time.UTC))
	_, h = quotaFields(t, st, now, limits)
	if want := `"hooks";q=10;w=1, "hooks_month";q=3;w=` + strconv.Itoa(29*86400); h.Get("RateLimit-Policy") != want {
		t.Errorf("February 2028: RateLimit-Policy %q, want %q", h.Get("RateLimit-Policy"), want)
	}
}

// TestQuotaZone: a daily byte quota in Europe/Berlin on 28 March 2027,
// when summer time starts: the day is 23 hours long (w=82800), and at
// 12:00 local time (10:00 UTC) 12 hours are left (t=43200); r is in
// content bytes.
func TestQuotaZone(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	st, now := clockStore(t)
	setClock(now, time.Date(2027, 3, 28, 12, 0, 0, 0, berlin))
	day := fleetstore.MustLimit(fleetstore.NewByteQuota("bytes_day", 1000, calendar.Day, berlin))
	_, h := quotaFields(t, st, now, []fleetstore.Limit{day})
	wantFields(t, "a 1-byte charge on the day summer time starts", h, map[string]string{
		"RateLimit-Policy":  `"bytes_day";q=1000;qu="content-bytes";w=82800`,
		"RateLimit":         `"bytes_day";r=999;t=43200`,
		"X-RateLimit-Limit": "1000", "X-RateLimit-Remaining": "999", "X-RateLimit-Reset": "43200",
	})
}

// TestQuotaUnused: a quota whose window holds nothing yet (a Result
// read without a charge) has all of n left and nothing more to come:
// t=0, as for a full bucket.
func TestQuotaUnused(t *testing.T) {
	month := fleetstore.MustLimit(fleetstore.NewQuota("hooks_month", 5, calendar.Month, nil))
	res := fleetstore.Result{Outcome: fleetstore.Duplicate, NBuckets: 1}
	res.Buckets[0] = fleetstore.Bucket{Kind: "hooks_month", ResetAfter: 10 * 24 * time.Hour}
	at := time.Date(2027, 4, 20, 0, 0, 0, 0, time.UTC) // April: 30 days
	h := http.Header{}
	headers.Write(h, &res, []fleetstore.Limit{month}, headers.Options{Now: func() time.Time { return at }})
	wantFields(t, "an unused window", h, map[string]string{
		"RateLimit-Policy": `"hooks_month";q=5;w=2592000`, "RateLimit": `"hooks_month";r=5;t=0`,
	})
}

// TestQuotaShadowReport: a quota the Hit charged as a shadow (package
// webhook defers over a quota that way) is reported as the policy it is,
// and its bucket's Denied, which says "over", does not make it the limit
// that denied a RateLimited Hit in the legacy fields: the byte limit that
// did is named.
func TestQuotaShadowReport(t *testing.T) {
	body := fleetstore.MustLimit(fleetstore.NewByteLimit(fleetstore.Bytes, 1000, 1000))
	month := fleetstore.MustLimit(fleetstore.NewQuota("hooks_month", 5, calendar.Month, nil))
	res := fleetstore.Result{Outcome: fleetstore.RateLimited, RetryAfter: 500 * time.Millisecond, NBuckets: 2}
	res.Buckets[0] = fleetstore.Bucket{Kind: fleetstore.Bytes, ResetAfter: 800 * time.Millisecond,
		Headroom: 200 * time.Millisecond, Denied: true}
	res.Buckets[1] = fleetstore.Bucket{Kind: "hooks_month", ResetAfter: time.Hour, Used: 6, Denied: true, Shadow: true}
	at := time.Date(2027, 4, 30, 23, 0, 0, 0, time.UTC)
	h := http.Header{}
	headers.Write(h, &res, []fleetstore.Limit{body, month}, headers.Options{Legacy: true, Now: func() time.Time { return at }})
	wantFields(t, "a byte denial beside a quota over n", h, map[string]string{
		"Retry-After":       "1",
		"RateLimit-Policy":  `"bytes";q=1000;qu="content-bytes";w=1, "hooks_month";q=5;w=2592000`,
		"RateLimit":         `"bytes";r=200;t=1, "hooks_month";r=0;t=3600`,
		"X-RateLimit-Limit": "1000", "X-RateLimit-Remaining": "200", "X-RateLimit-Reset": "1",
	})
}
