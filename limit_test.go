package fleetstore_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/gcra"
)

const us = time.Microsecond

// TestLimitCharge: golden charges of the limits of the README: 100 hooks
// a second with a burst of 200, 1 MiB of body a second with a burst of
// 8 MiB, and a rate whose interval does not divide the period.
func TestLimitCharge(t *testing.T) {
	t.Parallel()
	hooks := fleetstore.MustLimit(fleetstore.PerSecond(fleetstore.Hooks, 100, 200))
	body := fleetstore.MustLimit(fleetstore.NewByteLimit(fleetstore.Bytes, 1<<20, 8<<20))
	third := fleetstore.MustLimit(fleetstore.NewLimit("calls", 3, time.Second, 2))
	for _, tt := range []struct {
		name       string
		l          fleetstore.Limit
		cost       int64
		inc, capac time.Duration
	}{
		{"a hook", hooks, 1, 10 * time.Millisecond, 2 * time.Second},
		{"three hooks", hooks, 3, 30 * time.Millisecond, 2 * time.Second},
		{"a cost of 0 is one unit", hooks, 0, 10 * time.Millisecond, 2 * time.Second},
		{"a negative cost is one unit", hooks, -5, 10 * time.Millisecond, 2 * time.Second},
		{"1 KiB of body: 976.5625µs, up", body, 1024, 977 * us, 8 * time.Second},
		{"1 MiB of body", body, 1 << 20, time.Second, 8 * time.Second},
		{"8 MiB: the burst, conforms alone", body, 8 << 20, 8 * time.Second, 8 * time.Second},
		{"8 MiB + 1: over the burst", body, 8<<20 + 1, 8*time.Second + us, 8 * time.Second},
		{"an empty body is one byte", body, 0, us, 8 * time.Second},
		{"3 a second: 333334µs, up", third, 1, 333334 * us, 666668 * us},
		{"an overflowing cost saturates", hooks, 1 << 62, 9223372036854775 * us, 2 * time.Second},
	} {
		c := tt.l.Charge("acme", tt.cost)
		want := fleetstore.Charge{Kind: tt.l.Kind(), Tenant: "acme", Increment: tt.inc, Capacity: tt.capac}
		if c != want {
			t.Errorf("%s: %s.Charge(%d) = %+v, want %+v", tt.name, tt.l, tt.cost, c, want)
		}
	}
	if hooks.Burst() != 200 || body.Burst() != 8<<20 || !body.InBytes() || hooks.InBytes() {
		t.Errorf("accessors: %d %d %v %v", hooks.Burst(), body.Burst(), body.InBytes(), hooks.InBytes())
	}
	if got := hooks.String(); got != "hooks: 100 per 1s, burst 200" {
		t.Errorf("String: %q", got)
	}
	if got := body.String(); got != "bytes: 1048576 bytes per 1s, burst 8388608" {
		t.Errorf("String: %q", got)
	}
}

// TestLimitRemaining: Remaining never over-states what is left: a charge
// of Remaining units conforms on the headroom, one more unit does not
// (checked with gcra.Charge, the reference), for unit and byte limits of
// random rates and random headrooms.
func TestLimitRemaining(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(7, seed))
	const now = int64(1_800_000_000_000_000)
	for i := 0; i < 5000; i++ {
		var l fleetstore.Limit
		var err error
		if i%2 == 0 {
			l, err = fleetstore.NewLimit("hooks", 1+rng.Int64N(10_000), time.Duration(1+rng.Int64N(int64(time.Hour))), 1+rng.Int64N(1000))
		} else {
			l, err = fleetstore.NewByteLimit("bytes", 1+rng.Int64N(100<<20), 1+rng.Int64N(64<<20))
		}
		if err != nil {
			continue // a capacity over 366 days
		}
		capUS := l.Capacity().Microseconds()
		h := rng.Int64N(capUS + 1)
		if i%4 < 2 {
			h = capUS // a full bucket: where a capacity rounded up to the µs holds more than the burst
		}
		b := fleetstore.Bucket{Kind: l.Kind(), Headroom: time.Duration(h) * us, ResetAfter: time.Duration(capUS-h) * us}
		r := l.Remaining(b)
		tat := now + capUS - h // the bucket that has h left
		if r > 0 {
			c := l.Charge("t", r)
			if d := gcra.Charge(now, tat, c.Increment.Microseconds(), capUS); !d.Conform {
				t.Fatalf("%s, headroom %dµs: Remaining %d, but a charge of %d is denied (over-stated)", l, h, r, r)
			}
		}
		c := l.Charge("t", r+1)
		if d := gcra.Charge(now, tat, c.Increment.Microseconds(), capUS); d.Conform {
			t.Fatalf("%s, headroom %dµs: Remaining %d, but %d conform (under-stated)", l, h, r, r+1)
		}
	}
}

// TestLimitRemainingGolden: throttled's first rows in units: 5 = burst 4
// + 1 at 1/s leaves 4, 3, 2, 1, 0; and a byte bucket's headroom in bytes.
func TestLimitRemainingGolden(t *testing.T) {
	t.Parallel()
	five := fleetstore.MustLimit(fleetstore.PerSecond(fleetstore.Hooks, 1, 5))
	body := fleetstore.MustLimit(fleetstore.NewByteLimit(fleetstore.Bytes, 1<<20, 8<<20))
	body3 := fleetstore.MustLimit(fleetstore.NewByteLimit(fleetstore.Bytes, 3<<20, 8<<20))
	for _, tt := range []struct {
		l        fleetstore.Limit
		headroom time.Duration
		want     int64
	}{
		{five, 5 * time.Second, 5},
		{five, 4 * time.Second, 4},
		{five, 4*time.Second - us, 3},
		{five, time.Second, 1},
		{five, 999_999 * us, 0},
		{five, 0, 0},
		{body, 8 * time.Second, 8 << 20},
		{body, time.Second, 1 << 20},
		{body, 977 * us, 1024},  // 977µs × 1.048576 B/µs = 1024.46
		{body, 976 * us, 1023},  // 1023.41
		{body, us, 1},           // 1.05
		{body, -time.Second, 0}, // never negative
		// 3 MiB/s, burst 8 MiB: the capacity rounds up to 2 666 667µs,
		// which holds 8 388 609.05 bytes; a full bucket has the burst.
		{body3, body3.Capacity(), 8 << 20},
		{body3, 2 * body3.Capacity(), 8 << 20}, // no more than the burst, whatever the headroom
		{five, 6 * time.Second, 5},
	} {
		if got := tt.l.Remaining(fleetstore.Bucket{Headroom: tt.headroom}); got != tt.want {
			t.Errorf("%s: Remaining(headroom %v) = %d, want %d", tt.l, tt.headroom, got, tt.want)
		}
	}
	if got := (fleetstore.Limit{}).Remaining(fleetstore.Bucket{Headroom: time.Second}); got != 0 {
		t.Errorf("the zero Limit: Remaining %d, want 0", got)
	}
}

// TestLimitErrors: a bad argument is ErrInvalid naming it.
func TestLimitErrors(t *testing.T) {
	t.Parallel()
	day := 24 * time.Hour
	for _, tt := range []struct {
		field string
		err   error
	}{
		{"kind", second(fleetstore.NewLimit("Hooks", 1, time.Second, 1))},
		{"kind", second(fleetstore.NewLimit("", 1, time.Second, 1))},
		{"n", second(fleetstore.NewLimit("hooks", 0, time.Second, 1))},
		{"period", second(fleetstore.NewLimit("hooks", 1, 999*time.Nanosecond, 1))},
		{"period", second(fleetstore.NewLimit("hooks", 1, -time.Second, 1))},
		{"burst", second(fleetstore.NewLimit("hooks", 1, time.Second, 0))},
		{"burst", second(fleetstore.NewLimit("hooks", 1, day, 367))},
		{"kind", second(fleetstore.NewByteLimit("9bytes", 1, 1))},
		{"bytes_per_second", second(fleetstore.NewByteLimit("bytes", 0, 1))},
		{"burst_bytes", second(fleetstore.NewByteLimit("bytes", 1, -1))},
		{"burst_bytes", second(fleetstore.NewByteLimit("bytes", 1, 367*24*3600))},
	} {
		var inv *fleetstore.InvalidError
		if !errors.Is(tt.err, fleetstore.ErrInvalid) || !errors.As(tt.err, &inv) || inv.Field != tt.field {
			t.Errorf("got %v, want ErrInvalid naming %q", tt.err, tt.field)
		}
		if tt.err != nil && !strings.HasPrefix(tt.err.Error(), "fleetstore: limit: invalid "+tt.field+": ") {
			t.Errorf("message %q", tt.err)
		}
	}
	if _, err := fleetstore.NewLimit("hooks", 1, day, 366); err != nil {
		t.Errorf("366 days of capacity: %v", err)
	}
	// The capacity is burst × the interval rounded up: the message says so
	// (burst × period / n would be 1s here, well under 366 days).
	const maxInt = int64(^uint64(0) >> 1)
	_, err := fleetstore.PerSecond("hooks", maxInt, maxInt)
	if err == nil || !strings.Contains(err.Error(), "the emission interval 1µs (1s / "+strconv.FormatInt(maxInt, 10)) {
		t.Errorf("%d a second, burst %d: %v, want the rounded-up interval named", maxInt, maxInt, err)
	}
	defer func() {
		if recover() == nil {
			t.Error("MustLimit of an error did not panic")
		}
	}()
	fleetstore.MustLimit(fleetstore.PerSecond("hooks", 0, 1))
}

func second(_ fleetstore.Limit, err error) error { return err }

// TestLimitThroughStore: a Limit's charges and Remaining on memory://: a
// burst of hooks counts down to 0 and is then denied by hooks, and a body
// over the byte burst is ErrOverCapacity.
func TestLimitThroughStore(t *testing.T) {
	t.Parallel()
	st, err := fleetstore.Open("memory://")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	hooks := fleetstore.MustLimit(fleetstore.NewLimit(fleetstore.Hooks, 10, time.Hour, 3))
	body := fleetstore.MustLimit(fleetstore.NewByteLimit(fleetstore.Bytes, 1000, 10_000))
	for i, want := range []int64{2, 1, 0} {
		res, err := st.Hit(ctx, []fleetstore.Charge{hooks.Charge("acme", 1), body.Charge("acme", 1500)}, nil)
		if err != nil || res.Outcome != fleetstore.OK {
			t.Fatalf("hook %d: %+v %v", i+1, res, err)
		}
		q := res.Quota()
		if got := hooks.Remaining(q[0]); got != want {
			t.Errorf("hook %d: %d hooks left, want %d", i+1, got, want)
		}
		// 1500 bytes a hook of 10 000, at 1000 B/s: the few µs the Hits
		// take are not a byte.
		if got, wantBytes := body.Remaining(q[1]), 10_000-1500*int64(i+1); got != wantBytes {
			t.Errorf("hook %d: %d bytes left, want %d", i+1, got, wantBytes)
		}
	}
	res, err := st.Hit(ctx, []fleetstore.Charge{hooks.Charge("acme", 1), body.Charge("acme", 1500)}, nil)
	if err != nil || res.Outcome != fleetstore.RateLimited || !res.Quota()[0].Denied || res.Quota()[1].Denied {
		t.Fatalf("hook 4: %+v %v, want RateLimited by hooks alone", res, err)
	}
	if _, err := st.Hit(ctx, []fleetstore.Charge{body.Charge("other", 10_001)}, nil); !errors.Is(err, fleetstore.ErrOverCapacity) {
		t.Errorf("a body over the burst: %v, want ErrOverCapacity", err)
	}
}
