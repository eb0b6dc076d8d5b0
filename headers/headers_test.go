package headers_test

import (
	"context"
	"math"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/drivers/memory"
	"github.com/fleetstore/fleetstore/headers"
)

// clockStore opens a memory store on a clock the test moves (µs).
func clockStore(t *testing.T) (*fleetstore.Store, *atomic.Int64) {
	t.Helper()
	var now atomic.Int64
	now.Store(1_800_000_000_000_000)
	st, err := fleetstore.OpenDriver(memory.New(now.Load), "memory://")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st, &now
}

func hit(t *testing.T, st *fleetstore.Store, charges ...fleetstore.Charge) fleetstore.Result {
	t.Helper()
	res, err := st.Hit(context.Background(), charges, nil)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// fields returns the fields Write sets, with the legacy ones, for the Hit
// of one charge c of limits[0].
func fields(t *testing.T, st *fleetstore.Store, limits []fleetstore.Limit, c fleetstore.Charge) http.Header {
	t.Helper()
	res := hit(t, st, c)
	h := http.Header{}
	headers.Write(h, &res, limits, headers.Options{Legacy: true})
	return h
}

func wantFields(t *testing.T, what string, h http.Header, want map[string]string) {
	t.Helper()
	for _, k := range []string{"Retry-After", "RateLimit-Policy", "RateLimit", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"} {
		if got := h.Get(k); got != want[k] {
			t.Errorf("%s: %s: %q, want %q", what, k, got, want[k])
		}
	}
}

// TestBurst: throttled's table (limit 5 = burst 4 + 1 at 1/s) as headers,
// with the legacy fields: remaining 4, 3, 2, 1, 0, each with one more unit
// 1s away (t) and the bucket full again in 1–5s (X-RateLimit-Reset), then
// a denial asking for 1s, no earlier than t; and 3.1s later, remaining 1,
// the next unit in 0.9s rounded up to 1, full in 3.9s rounded up to 4.
func TestBurst(t *testing.T) {
	st, now := clockStore(t)
	five := fleetstore.MustLimit(fleetstore.PerSecond(fleetstore.Hooks, 1, 5))
	limits := []fleetstore.Limit{five}
	policy := `"hooks";q=5;w=5`
	for i, r := range []string{"4", "3", "2", "1", "0"} {
		wantFields(t, "hook "+strconv.Itoa(i+1), fields(t, st, limits, five.Charge("acme", 1)), map[string]string{
			"RateLimit-Policy": policy, "RateLimit": `"hooks";r=` + r + `;t=1`,
			"X-RateLimit-Limit": "5", "X-RateLimit-Remaining": r, "X-RateLimit-Reset": strconv.Itoa(i + 1),
		})
	}
	wantFields(t, "hook 6 (denied)", fields(t, st, limits, five.Charge("acme", 1)), map[string]string{
		"Retry-After": "1", "RateLimit-Policy": policy, "RateLimit": `"hooks";r=0;t=1`,
		"X-RateLimit-Limit": "5", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "5",
	})
	// Rows 7 and 8: 3s and 3.1s after the start.
	now.Add(3_000_000)
	hit(t, st, five.Charge("acme", 1))
	now.Add(100_000)
	wantFields(t, "hook 8 at +3.1s", fields(t, st, limits, five.Charge("acme", 1)), map[string]string{"RateLimit-Policy": policy, "RateLimit": `"hooks";r=1;t=1`,
		"X-RateLimit-Limit": "5", "X-RateLimit-Remaining": "1", "X-RateLimit-Reset": "4"})
}

// TestReset: t is the wait for one more unit, not for a full bucket (the
// draft's -10, §4.1.2), and a denial's Retry-After is that wait (no
// earlier than t, §6), while the legacy X-RateLimit-Reset is the time
// until full. 1 hook per 10s, burst 3: three at once, a fourth 4s later
// (denied: 6s to the next unit, 26s to full), a fifth 7s after that (ok:
// 9s to the next unit, 29s to full).
func TestReset(t *testing.T) {
	st, now := clockStore(t)
	slow := fleetstore.MustLimit(fleetstore.NewLimit(fleetstore.Hooks, 1, 10*time.Second, 3))
	limits := []fleetstore.Limit{slow}
	policy := `"hooks";q=3;w=30`
	for range 3 {
		hit(t, st, slow.Charge("acme", 1))
	}
	now.Add(4_000_000)
	wantFields(t, "denied 4s after the burst", fields(t, st, limits, slow.Charge("acme", 1)), map[string]string{
		"Retry-After": "6", "RateLimit-Policy": policy, "RateLimit": `"hooks";r=0;t=6`,
		"X-RateLimit-Limit": "3", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "26",
	})
	now.Add(7_000_000)
	wantFields(t, "accepted 11s after the burst", fields(t, st, limits, slow.Charge("acme", 1)), map[string]string{
		"RateLimit-Policy": policy, "RateLimit": `"hooks";r=0;t=9`,
		"X-RateLimit-Limit": "3", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "29",
	})
	// A Duplicate-like report of a full bucket (nothing charged): all
	// there, nothing more to come.
	full := fleetstore.Result{Outcome: fleetstore.Duplicate, NBuckets: 1}
	full.Buckets[0] = fleetstore.Bucket{Kind: fleetstore.Hooks, Headroom: slow.Capacity()}
	h := http.Header{}
	headers.Write(h, &full, limits, headers.Options{})
	wantFields(t, "a full bucket", h, map[string]string{"RateLimit-Policy": policy, "RateLimit": `"hooks";r=3;t=0`})
}

// TestSFIntegers: a byte limit's burst and remaining beyond the 15 digits
// of an sf-integer (RFC 9651 §3.3.1) are capped there, so that the fields
// still parse.
func TestSFIntegers(t *testing.T) {
	st, _ := clockStore(t)
	huge := fleetstore.MustLimit(fleetstore.NewByteLimit(fleetstore.Bytes, 1<<50, 1<<55)) // 32 PiB burst, 32s
	res := hit(t, st, huge.Charge("acme", 1<<20))
	h := http.Header{}
	headers.Write(h, &res, []fleetstore.Limit{huge}, headers.Options{})
	wantFields(t, "a 32 PiB burst", h, map[string]string{
		"RateLimit-Policy": `"bytes";q=999999999999999;qu="content-bytes";w=32`,
		"RateLimit":        `"bytes";r=999999999999999;t=1`,
	})
}

// TestTwoLimits: the package doc's example, hooks and bytes, and the
// legacy fields of the limit nearest exhaustion, or of the one that
// denied.
func TestTwoLimits(t *testing.T) {
	st, _ := clockStore(t)
	hooks := fleetstore.MustLimit(fleetstore.PerSecond(fleetstore.Hooks, 100, 200))
	body := fleetstore.MustLimit(fleetstore.NewByteLimit(fleetstore.Bytes, 1<<20, 8<<20))
	limits := []fleetstore.Limit{hooks, body}
	var res fleetstore.Result
	for range 3 {
		res = hit(t, st, hooks.Charge("acme", 1), body.Charge("acme", 1024))
	}
	h := http.Header{}
	headers.Write(h, &res, limits, headers.Options{Legacy: true})
	wantFields(t, "three hooks of 1 KiB", h, map[string]string{
		"RateLimit-Policy":  `"hooks";q=200;w=2, "bytes";q=8388608;qu="content-bytes";w=8`,
		"RateLimit":         `"hooks";r=197;t=1, "bytes";r=8385534;t=1`,
		"X-RateLimit-Limit": "200", "X-RateLimit-Remaining": "197", "X-RateLimit-Reset": "1", // 197/200 left of hooks, more of bytes
	})

	// A body of 8 MiB − 2 KiB does not fit: bytes denies, hooks does not.
	res = hit(t, st, hooks.Charge("acme", 1), body.Charge("acme", 8<<20-2048))
	if res.Outcome != fleetstore.RateLimited {
		t.Fatalf("big body: %v", res.Outcome)
	}
	h = http.Header{}
	headers.Write(h, &res, limits, headers.Options{Legacy: true})
	wantFields(t, "a body over what is left", h, map[string]string{
		"Retry-After":       "1",
		"RateLimit-Policy":  `"hooks";q=200;w=2, "bytes";q=8388608;qu="content-bytes";w=8`,
		"RateLimit":         `"hooks";r=197;t=1, "bytes";r=8385534;t=1`,
		"X-RateLimit-Limit": "8388608", "X-RateLimit-Remaining": "8385534", "X-RateLimit-Reset": "1", // the one that denied
	})
}

// TestMismatch: a limit whose place in the Result holds another kind is
// left out, and a Result without states gets no RateLimit fields.
func TestMismatch(t *testing.T) {
	st, _ := clockStore(t)
	hooks := fleetstore.MustLimit(fleetstore.PerSecond(fleetstore.Hooks, 1, 5))
	body := fleetstore.MustLimit(fleetstore.NewByteLimit(fleetstore.Bytes, 1000, 1000))
	res := hit(t, st, hooks.Charge("acme", 1), body.Charge("acme", 10))
	h := http.Header{}
	headers.Write(h, &res, []fleetstore.Limit{body, hooks}, headers.Options{Legacy: true}) // the wrong order
	wantFields(t, "limits in the wrong order", h, map[string]string{})

	h = http.Header{}
	headers.Write(h, &res, []fleetstore.Limit{hooks}, headers.Options{}) // fewer limits than charges
	wantFields(t, "the first limit only", h, map[string]string{"RateLimit-Policy": `"hooks";q=5;w=5`, "RateLimit": `"hooks";r=4;t=1`})

	h = http.Header{}
	pending := fleetstore.Result{Outcome: fleetstore.Pending, RetryAfter: 1500 * time.Millisecond}
	headers.Write(h, &pending, []fleetstore.Limit{hooks}, headers.Options{Legacy: true})
	wantFields(t, "a claim-only Pending", h, map[string]string{"Retry-After": "2"})
}

// TestWriteReplaces: Write replaces every field it writes, so that a
// second Write leaves no field of the first that its Result does not
// call for.
func TestWriteReplaces(t *testing.T) {
	st, _ := clockStore(t)
	one := fleetstore.MustLimit(fleetstore.PerSecond(fleetstore.Hooks, 1, 1))
	hit(t, st, one.Charge("acme", 1))
	limited := hit(t, st, one.Charge("acme", 1))
	if limited.Outcome != fleetstore.RateLimited {
		t.Fatalf("second hit: %v, want RateLimited", limited.Outcome)
	}
	h := http.Header{}
	headers.Write(h, &limited, []fleetstore.Limit{one}, headers.Options{Legacy: true})
	if h.Get("Retry-After") == "" || h.Get("X-RateLimit-Remaining") == "" {
		t.Fatalf("RateLimited: %v", h)
	}
	h.Set("Content-Type", "text/plain") // not Write's: kept
	headers.Write(h, &fleetstore.Result{Outcome: fleetstore.OK}, []fleetstore.Limit{one}, headers.Options{})
	wantFields(t, "an OK without states after a RateLimited", h, map[string]string{})
	if h.Get("Content-Type") != "text/plain" {
		t.Errorf("Write removed a field not its own: %v", h)
	}
}

func TestRetryAfterSeconds(t *testing.T) {
	for _, tt := range []struct {
		give time.Duration
		want int64
	}{
		{0, 1}, {time.Millisecond, 1}, {time.Second, 1}, {time.Second + time.Millisecond, 2},
		{59999 * time.Millisecond, 60}, {time.Hour, 3600},
		{math.MaxInt64, math.MaxInt64/int64(time.Second) + 1}, // no overflow to 1 (a sender told to come straight back)
		{math.MaxInt64 - time.Second + 2, 9_223_372_036},      // 9 223 372 035.85…s
	} {
		if got := headers.RetryAfterSeconds(tt.give); got != tt.want {
			t.Errorf("RetryAfterSeconds(%v) = %d, want %d", tt.give, got, tt.want)
		}
	}
}
