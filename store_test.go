package fleetstore_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/driver"
)

// storeErr is a driver's own error type, to find with errors.As.
type storeErr struct{ code int }

func (e *storeErr) Error() string { return fmt.Sprintf("backend error %d", e.code) }

// netTimeout is a net.Error that timed out.
type netTimeout struct{}

func (netTimeout) Error() string   { return "i/o timeout" }
func (netTimeout) Timeout() bool   { return true }
func (netTimeout) Temporary() bool { return true }

var _ net.Error = netTimeout{}

var (
	testClaim  = fleetstore.Claim{Tenant: "acme", SourceID: "github", Key: "d-1", HookID: "h-1", TTL: time.Hour, PendingTTL: time.Minute}
	testCharge = fleetstore.Charge{Kind: fleetstore.Hooks, Tenant: "acme", Increment: time.Second, Capacity: 10 * time.Second}
	testLimit  = fleetstore.MustLimit(fleetstore.PerSecond(fleetstore.Hooks, 1, 10)) // testCharge's
)

// ops calls every method of st that reaches the driver once.
var ops = []struct {
	name string
	call func(context.Context, *fleetstore.Store) error
}{
	{"hit", func(ctx context.Context, st *fleetstore.Store) error {
		_, err := st.Hit(ctx, []fleetstore.Charge{testCharge}, &testClaim)
		return err
	}},
	{"commit", func(ctx context.Context, st *fleetstore.Store) error { return st.Commit(ctx, testClaim) }},
	{"release", func(ctx context.Context, st *fleetstore.Store) error { return st.Release(ctx, testClaim) }},
	{"reset", func(ctx context.Context, st *fleetstore.Store) error { return st.Reset(ctx, "acme") }},
	{"ping", func(ctx context.Context, st *fleetstore.Store) error { return st.Ping(ctx) }},
	{"peek", func(ctx context.Context, st *fleetstore.Store) error {
		_, err := st.Peek(ctx, "acme", testLimit)
		return err
	}},
}

// failing returns a conn whose every method returns the error of fail.
func failing(fail func(ctx context.Context) error) *fakeConn {
	all := func(ctx context.Context, _ []driver.Claim) ([]error, error) {
		return nil, fail(ctx)
	}
	return &fakeConn{
		hit: func(ctx context.Context, _ []driver.Charge, _ *driver.Claim) (driver.Result, error) {
			return driver.Result{}, fail(ctx)
		},
		commit:  all,
		release: all,
		other:   fail,
	}
}

// TestErrorWrapping: a driver's error is classified and wrapped once, for
// every method: errors.Is finds the sentinel and errors.As the driver's
// own error.
func TestErrorWrapping(t *testing.T) {
	t.Parallel()
	custom := &storeErr{code: 7}
	tests := []struct {
		name       string
		timeout    time.Duration
		fail       func(ctx context.Context) error
		want       []error // every one matches
		wantNot    []error // none matches
		wantCustom bool
	}{
		{
			name:       "classified unavailable",
			fail:       func(context.Context) error { return fmt.Errorf("dial: %w: %w", driver.ErrUnavailable, custom) },
			want:       []error{fleetstore.ErrUnavailable},
			wantNot:    []error{fleetstore.ErrTimeout},
			wantCustom: true,
		},
		{
			name:       "classified timeout",
			fail:       func(context.Context) error { return fmt.Errorf("read: %w: %w", driver.ErrTimeout, custom) },
			want:       []error{fleetstore.ErrTimeout, context.DeadlineExceeded},
			wantNot:    []error{fleetstore.ErrUnavailable},
			wantCustom: true,
		},
		{
			name:    "unclassified after the deadline",
			timeout: time.Millisecond,
			fail: func(ctx context.Context) error {
				<-ctx.Done()
				return custom
			},
			want:       []error{fleetstore.ErrTimeout, context.DeadlineExceeded},
			wantNot:    []error{fleetstore.ErrUnavailable},
			wantCustom: true,
		},
		{
			name:    "context error at the deadline",
			timeout: time.Millisecond,
			fail: func(ctx context.Context) error {
				<-ctx.Done()
				return ctx.Err()
			},
			want:    []error{fleetstore.ErrTimeout, context.DeadlineExceeded},
			wantNot: []error{fleetstore.ErrUnavailable},
		},
		{
			name:       "unclassified",
			fail:       func(context.Context) error { return custom },
			want:       []error{fleetstore.ErrUnavailable},
			wantNot:    []error{fleetstore.ErrTimeout, context.DeadlineExceeded},
			wantCustom: true,
		},
		{
			name:    "plain error",
			fail:    func(context.Context) error { return errors.New("connection reset by peer") },
			want:    []error{fleetstore.ErrUnavailable},
			wantNot: []error{fleetstore.ErrTimeout},
		},
		{
			name:    "net timeout",
			fail:    func(context.Context) error { return &net.OpError{Op: "read", Net: "tcp", Err: netTimeout{}} },
			want:    []error{fleetstore.ErrTimeout, context.DeadlineExceeded},
			wantNot: []error{fleetstore.ErrUnavailable},
		},
	}
	for _, tt := range tests {
		for _, op := range ops {
			t.Run(tt.name+"/"+op.name, func(t *testing.T) {
				t.Parallel()
				timeout := tt.timeout
				if timeout == 0 {
					timeout = time.Hour // no deadline passes during the call
				}
				st := openFake(t, failing(tt.fail), fleetstore.WithTimeout(timeout))
				err := op.call(context.Background(), st)
				if err == nil {
					t.Fatal("no error")
				}
				for _, w := range tt.want {
					if !errors.Is(err, w) {
						t.Errorf("%q does not match %v", err, w)
					}
				}
				for _, w := range tt.wantNot {
					if errors.Is(err, w) {
						t.Errorf("%q matches %v", err, w)
					}
				}
				var got *storeErr
				if found := errors.As(err, &got); found != tt.wantCustom || found && got != custom {
					t.Errorf("errors.As(%q, *storeErr) = %v (%v), want %v", err, found, got, tt.wantCustom)
				}
				msg := err.Error()
				if prefix := "fleetstore: " + op.name + ": "; !strings.HasPrefix(msg, prefix) || strings.Count(msg, "fleetstore:") != 1 {
					t.Errorf("%q: want one prefix %q (wrapped once)", msg, prefix)
				}
			})
		}
	}
}

// TestCallerCancel: the caller's own cancellation is reported as such,
// not as a timeout or an outage of the store.
func TestCallerCancel(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	st := openFake(t, failing(func(c context.Context) error {
		cancel()
		<-c.Done()
		return c.Err()
	}), fleetstore.WithTimeout(time.Hour))
	err := st.Ping(ctx)
	if !errors.Is(err, context.Canceled) || errors.Is(err, fleetstore.ErrTimeout) || errors.Is(err, fleetstore.ErrUnavailable) {
		t.Errorf("ping cancelled by its caller: %v, want context.Canceled only", err)
	}
}

// TestDoneContext: a context already done fails at once, without a driver
// call.
func TestDoneContext(t *testing.T) {
	t.Parallel()
	expired, cancel1 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel1()
	cancelled, cancel2 := context.WithCancel(context.Background())
	cancel2()
	for _, op := range ops {
		conn := &fakeConn{}
		st := openFake(t, conn)
		if err := op.call(expired, st); !errors.Is(err, fleetstore.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s with an expired context: %v, want ErrTimeout", op.name, err)
		}
		if err := op.call(cancelled, st); !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a cancelled context: %v, want context.Canceled", op.name, err)
		}
		if n := conn.calls.Load(); n != 0 {
			t.Errorf("%s with a done context made %d driver calls", op.name, n)
		}
	}
	// A call with nothing to send fails on a done context all the same (T1).
	st := openFake(t, &fakeConn{})
	for name, call := range map[string]func(context.Context) error{
		"empty Hit":     func(ctx context.Context) error { _, err := st.Hit(ctx, nil, nil); return err },
		"empty Commit":  func(ctx context.Context) error { return st.Commit(ctx) },
		"empty Release": func(ctx context.Context) error { return st.Release(ctx) },
	} {
		if err := call(expired); !errors.Is(err, fleetstore.ErrTimeout) {
			t.Errorf("%s with an expired context: %v, want ErrTimeout", name, err)
		}
		if err := call(cancelled); !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a cancelled context: %v, want context.Canceled", name, err)
		}
	}
}

// TestInvalidResult: a driver's Result that breaks CONTRACT §1 is an error,
// never passed to the caller.
func TestInvalidResult(t *testing.T) {
	t.Parallel()
	// testCharge: increment 1s, capacity 10s. A fresh bucket charged once
	// is 1s from full; a drained one, 10s: a charge waits 1s.
	charged, drained := reports(time.Second), reports(10*time.Second)
	tests := []struct {
		give    driver.Result
		wantErr bool
	}{
		{give: driver.Result{}, wantErr: true},
		{give: driver.Result{Outcome: 99}, wantErr: true},
		{give: driver.Result{Outcome: -1}, wantErr: true},
		{give: charged(driver.Result{Outcome: driver.Pending}), wantErr: true},
		{give: charged(driver.Result{Outcome: driver.Pending, RetryAfter: 1500 * time.Microsecond}), wantErr: true},
		{give: charged(driver.Result{Outcome: driver.Pending, RetryAfter: -time.Second}), wantErr: true},
		{give: drained(driver.Result{Outcome: driver.RateLimited}), wantErr: true},
		{give: drained(driver.Result{Outcome: driver.RateLimited, RetryAfter: 999 * time.Microsecond}), wantErr: true},
		{give: drained(driver.Result{Outcome: driver.RateLimited, RetryAfter: time.Second + time.Nanosecond}), wantErr: true},
		{give: charged(driver.Result{Outcome: driver.Duplicate}), wantErr: true},
		// OK and Duplicate carry no retry-after; only the Store marks a
		// result local (§1.2).
		{give: charged(driver.Result{Outcome: driver.OK, RetryAfter: time.Second}), wantErr: true},
		{give: charged(driver.Result{Outcome: driver.Duplicate, HookID: "h-0", RetryAfter: time.Second}), wantErr: true},
		{give: charged(driver.Result{Outcome: driver.OK, Local: true}), wantErr: true},
		// G10: one bucket state per charge, whole µs, 0 to 2 × 366 days,
		// and a denial that the states bear out.
		{give: driver.Result{Outcome: driver.OK}, wantErr: true},
		{give: reports(time.Second, time.Second)(driver.Result{Outcome: driver.OK}), wantErr: true},
		{give: reports(-time.Microsecond)(driver.Result{Outcome: driver.OK}), wantErr: true},
		{give: reports(1500 * time.Nanosecond)(driver.Result{Outcome: driver.OK}), wantErr: true},
		{give: reports(2*366*24*time.Hour + time.Microsecond)(driver.Result{Outcome: driver.OK}), wantErr: true},
		{give: charged(driver.Result{Outcome: driver.RateLimited, RetryAfter: time.Second}), wantErr: true},
		{give: drained(driver.Result{Outcome: driver.RateLimited, RetryAfter: 2 * time.Second}), wantErr: true},
		{give: reports(10*time.Second + 1500*time.Microsecond)(driver.Result{Outcome: driver.RateLimited, RetryAfter: time.Second}), wantErr: true},
		{give: charged(driver.Result{Outcome: driver.OK})},
		{give: reports(0)(driver.Result{Outcome: driver.OK})}, // an own retry long after its charge
		{give: reports(2 * 366 * 24 * time.Hour)(driver.Result{Outcome: driver.OK})},
		{give: charged(driver.Result{Outcome: driver.Duplicate, HookID: "h-0"})},
		{give: charged(driver.Result{Outcome: driver.Pending, RetryAfter: time.Millisecond})},
		{give: drained(driver.Result{Outcome: driver.RateLimited, RetryAfter: time.Second})},
		{give: reports(10*time.Second + 1500*time.Microsecond)(driver.Result{Outcome: driver.RateLimited, RetryAfter: 1002 * time.Millisecond})},
		{give: reports(99 * time.Second)(driver.Result{Outcome: driver.RateLimited, RetryAfter: 90 * time.Second})},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%v/%q/%v/%v", tt.give.Outcome, tt.give.HookID, tt.give.RetryAfter, tt.give.Quota()), func(t *testing.T) {
			t.Parallel()
			st := openFake(t, &fakeConn{hit: func(context.Context, []driver.Charge, *driver.Claim) (driver.Result, error) {
				return tt.give, nil
			}})
			res, err := st.Hit(context.Background(), []fleetstore.Charge{testCharge}, &testClaim)
			if !tt.wantErr {
				want := tt.give
				want.Buckets[0].Kind = testCharge.Kind
				want.Buckets[0].Headroom = max(testCharge.Capacity-want.Buckets[0].ResetAfter, 0)
				want.Buckets[0].Denied = want.Outcome == driver.RateLimited
				if err != nil || res != want {
					t.Fatalf("Hit = %+v, %v, want %+v, nil", res, err, want)
				}
				return
			}
			if err == nil {
				t.Fatalf("Hit = %+v, nil: an invalid driver result was passed through", res)
			}
			if res != (fleetstore.Result{}) {
				t.Errorf("Hit returned %+v with its error, want the zero Result", res)
			}
			if !errors.Is(err, fleetstore.ErrUnavailable) {
				t.Errorf("error %q does not match ErrUnavailable", err)
			}
		})
	}
}

// TestSettleResultCount: a driver answering a batch with the wrong number
// of results is an error.
func TestSettleResultCount(t *testing.T) {
	t.Parallel()
	claims := []fleetstore.Claim{testClaim, testClaim, testClaim}
	claims[1].Key, claims[2].Key = "d-2", "d-3"
	for _, n := range []int{0, 2, 4} {
		settle := func(context.Context, []driver.Claim) ([]error, error) { return make([]error, n), nil }
		st := openFake(t, &fakeConn{commit: settle, release: settle})
		if err := st.Commit(context.Background(), claims...); !errors.Is(err, fleetstore.ErrUnavailable) {
			t.Errorf("commit of 3 claims answered with %d results: %v, want ErrUnavailable", n, err)
		}
		if err := st.Release(context.Background(), claims...); !errors.Is(err, fleetstore.ErrUnavailable) {
			t.Errorf("release of 3 claims answered with %d results: %v, want ErrUnavailable", n, err)
		}
	}
}

// TestSettleBatchErrors: one failure of the whole call is said once; claim
// outcomes are reported per claim, naming it, and the rest succeed.
func TestSettleBatchErrors(t *testing.T) {
	t.Parallel()
	claims := make([]fleetstore.Claim, 5)
	for i := range claims {
		claims[i] = testClaim
		claims[i].Key = fmt.Sprintf("event-%d", i)
	}
	transport := &storeErr{code: 104}

	t.Run("whole-call failure", func(t *testing.T) {
		settle := func(_ context.Context, cs []driver.Claim) ([]error, error) {
			return nil, transport
		}
		st := openFake(t, &fakeConn{commit: settle, release: settle})
		for _, err := range []error{st.Commit(context.Background(), claims...), st.Release(context.Background(), claims...)} {
			if !errors.Is(err, fleetstore.ErrUnavailable) {
				t.Errorf("%v: want ErrUnavailable", err)
			}
			if n := strings.Count(fmt.Sprint(err), transport.Error()); n != 1 {
				t.Errorf("%q repeats the transport error %d times, want once", err, n)
			}
			var got *storeErr
			if !errors.As(err, &got) || got != transport {
				t.Errorf("errors.As(%q, *storeErr) failed", err)
			}
			var ce *fleetstore.ClaimError
			if errors.As(err, &ce) {
				t.Errorf("%q: a whole-call failure reported as claims[%d]'s", err, ce.Index)
			}
		}
	})

	t.Run("same error in every slot is per claim", func(t *testing.T) {
		// No convention: a driver that reports a failure per claim gets
		// one per claim, even when they are the same value.
		settle := func(_ context.Context, cs []driver.Claim) ([]error, error) {
			errs := make([]error, len(cs))
			for i := range errs {
				errs[i] = transport
			}
			return errs, nil
		}
		st := openFake(t, &fakeConn{commit: settle})
		err := st.Commit(context.Background(), claims...)
		if !errors.Is(err, fleetstore.ErrUnavailable) {
			t.Errorf("%v: want ErrUnavailable", err)
		}
		if n := strings.Count(fmt.Sprint(err), transport.Error()); n != len(claims) {
			t.Errorf("%q names the transport error %d times, want once per claim (%d)", err, n, len(claims))
		}
	})

	t.Run("per-claim outcomes", func(t *testing.T) {
		lost := &driver.ClaimLostError{Holder: "h-9"}
		var got []driver.Claim
		st := openFake(t, &fakeConn{commit: func(_ context.Context, cs []driver.Claim) ([]error, error) {
			got = slices.Clone(cs)
			errs := make([]error, len(cs))
			errs[1], errs[3] = lost, lost
			return errs, nil
		}})
		err := st.Commit(context.Background(), claims...)
		if !slices.Equal(got, claims) {
			t.Fatalf("driver got %d claims %v, want all %d in one call", len(got), got, len(claims))
		}
		if !errors.Is(err, fleetstore.ErrClaimLost) {
			t.Fatalf("%v: want ErrClaimLost", err)
		}
		var cl *fleetstore.ClaimLostError
		if !errors.As(err, &cl) || cl.Holder != "h-9" {
			t.Errorf("errors.As(%q, *ClaimLostError) = %v", err, cl)
		}
		var idx []int
		for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
			var ce *fleetstore.ClaimError
			if !errors.As(e, &ce) {
				t.Fatalf("%q: joined error %q is not a *ClaimError", err, e)
			}
			if ce.Key != claims[ce.Index].Key || ce.Tenant != claims[ce.Index].Tenant || ce.SourceID != claims[ce.Index].SourceID {
				t.Errorf("ClaimError %+v does not name claims[%d]", ce, ce.Index)
			}
			idx = append(idx, ce.Index)
		}
		if !slices.Equal(idx, []int{1, 3}) {
			t.Errorf("failed claims %v, want [1 3]", idx)
		}
		msg := err.Error()
		for i := range claims {
			named := strings.Contains(msg, fmt.Sprintf("claims[%d]", i)) && strings.Contains(msg, claims[i].Key)
			if lostOne := i == 1 || i == 3; named != lostOne {
				t.Errorf("claim %d named in %q: %v, want %v", i, msg, named, lostOne)
			}
		}
		if strings.Contains(msg, "h-9") == false {
			t.Errorf("%q does not name the holder", msg)
		}
	})

	t.Run("already committed", func(t *testing.T) {
		st := openFake(t, &fakeConn{release: func(_ context.Context, cs []driver.Claim) ([]error, error) {
			errs := make([]error, len(cs))
			for i := range errs {
				errs[i] = driver.ErrAlreadyCommitted
			}
			return errs, nil
		}})
		err := st.Release(context.Background(), claims[:2]...)
		if !errors.Is(err, fleetstore.ErrAlreadyCommitted) || errors.Is(err, fleetstore.ErrUnavailable) {
			t.Fatalf("%v: want ErrAlreadyCommitted only", err)
		}
		if msg := err.Error(); !strings.Contains(msg, "claims[0]") || !strings.Contains(msg, "claims[1]") {
			t.Errorf("%q: want both claims named (an outcome per claim, not one failure)", msg)
		}
	})
}

// TestChargesNotModified: the Store truncates sub-µs increments and
// capacities on a copy; the caller's slice is unchanged.
func TestChargesNotModified(t *testing.T) {
	t.Parallel()
	var got []driver.Charge
	st := openFake(t, &fakeConn{hit: func(_ context.Context, cs []driver.Charge, _ *driver.Claim) (driver.Result, error) {
		got = slices.Clone(cs)
		return okResult(cs), nil
	}})
	charges := []fleetstore.Charge{
		{Kind: fleetstore.Hooks, Tenant: "acme", Increment: 1500 * time.Nanosecond, Capacity: 10500 * time.Nanosecond},
		{Kind: fleetstore.Bytes, Tenant: "acme", Increment: 3 * time.Microsecond, Capacity: 7*time.Microsecond + 999*time.Nanosecond},
	}
	orig := slices.Clone(charges)
	if _, err := st.Hit(context.Background(), charges, nil); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(charges, orig) {
		t.Errorf("caller's charges changed: %+v, was %+v", charges, orig)
	}
	want := []driver.Charge{
		{Kind: fleetstore.Hooks, Tenant: "acme", Increment: time.Microsecond, Capacity: 10 * time.Microsecond},
		{Kind: fleetstore.Bytes, Tenant: "acme", Increment: 3 * time.Microsecond, Capacity: 7 * time.Microsecond},
	}
	if !slices.Equal(got, want) {
		t.Errorf("driver got %+v, want %+v (truncated to µs)", got, want)
	}
}

// TestEmptyHit: a Hit with no charges and no claim is OK without a round
// trip; an empty Commit or Release sends nothing.
func TestEmptyHit(t *testing.T) {
	t.Parallel()
	conn := &fakeConn{}
	st := openFake(t, conn)
	for _, charges := range [][]fleetstore.Charge{nil, {}} {
		res, err := st.Hit(context.Background(), charges, nil)
		if err != nil || res != (fleetstore.Result{Outcome: fleetstore.OK}) {
			t.Errorf("empty Hit = %+v, %v, want OK", res, err)
		}
	}
	if err := st.Commit(context.Background()); err != nil {
		t.Errorf("empty Commit: %v", err)
	}
	if err := st.Release(context.Background()); err != nil {
		t.Errorf("empty Release: %v", err)
	}
	if n := conn.calls.Load(); n != 0 {
		t.Errorf("%d driver calls, want none", n)
	}
	// A Hit with only a claim, or only a charge, does reach the driver.
	if _, err := st.Hit(context.Background(), nil, &testClaim); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Hit(context.Background(), []fleetstore.Charge{testCharge}, nil); err != nil {
		t.Fatal(err)
	}
	if n := conn.calls.Load(); n != 2 {
		t.Errorf("%d driver calls for two non-empty Hits, want 2", n)
	}
}

// TestInvalidNotSent: a bad argument never reaches the driver.
func TestInvalidNotSent(t *testing.T) {
	t.Parallel()
	conn := &fakeConn{}
	st := openFake(t, conn)
	bad := testClaim
	bad.HookID = ""
	ctx := context.Background()
	over := testCharge
	over.Increment = over.Capacity + time.Microsecond
	errs := []error{
		func() error { _, err := st.Hit(ctx, []fleetstore.Charge{testCharge}, &bad); return err }(),
		func() error { _, err := st.Hit(ctx, []fleetstore.Charge{over}, nil); return err }(),
		st.Commit(ctx, testClaim, bad),
		st.Release(ctx, bad),
		st.Reset(ctx, ""),
	}
	for i, err := range errs {
		if !errors.Is(err, fleetstore.ErrInvalid) && !errors.Is(err, fleetstore.ErrOverCapacity) {
			t.Errorf("call %d: %v, want ErrInvalid or ErrOverCapacity", i, err)
		}
	}
	if n := conn.calls.Load(); n != 0 {
		t.Errorf("%d driver calls with bad arguments, want none", n)
	}
	// The arguments come before the context (CONTRACT §1.2): bad ones on
	// an expired context are ErrInvalid, not ErrTimeout.
	expired, cancel := context.WithDeadline(ctx, time.Now().Add(-time.Second))
	defer cancel()
	for name, err := range map[string]error{
		"Hit":     func() error { _, err := st.Hit(expired, []fleetstore.Charge{testCharge}, &bad); return err }(),
		"Commit":  st.Commit(expired, bad),
		"Release": st.Release(expired, bad),
		"Reset":   st.Reset(expired, ""),
	} {
		if !errors.Is(err, fleetstore.ErrInvalid) || errors.Is(err, fleetstore.ErrTimeout) {
			t.Errorf("%s with bad arguments on an expired context: %v, want ErrInvalid", name, err)
		}
	}
}

// TestClose: after Close every method returns ErrClosed without calling
// the driver; Close twice is fine and closes the driver once.
func TestClose(t *testing.T) {
	t.Parallel()
	conn := &fakeConn{}
	st := openFake(t, conn)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if n := conn.closes.Load(); n != 1 {
		t.Errorf("driver closed %d times, want once", n)
	}
	for _, op := range ops {
		if err := op.call(context.Background(), st); !errors.Is(err, fleetstore.ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", op.name, err)
		}
	}
	if _, err := st.Hit(context.Background(), nil, nil); !errors.Is(err, fleetstore.ErrClosed) {
		t.Errorf("empty Hit after Close: %v, want ErrClosed", err)
	}
	// Closed comes before the arguments: bad ones are ErrClosed too.
	bad := testClaim
	bad.HookID = ""
	badCharge := testCharge
	badCharge.Kind = "Bad"
	for name, err := range map[string]error{
		"Hit":     func() error { _, err := st.Hit(context.Background(), []fleetstore.Charge{badCharge}, nil); return err }(),
		"Commit":  st.Commit(context.Background(), bad),
		"Release": st.Release(context.Background(), bad),
		"Reset":   st.Reset(context.Background(), ""),
	} {
		if !errors.Is(err, fleetstore.ErrClosed) || errors.Is(err, fleetstore.ErrInvalid) {
			t.Errorf("%s with bad arguments after Close: %v, want ErrClosed", name, err)
		}
	}
	if n := conn.calls.Load(); n != 0 {
		t.Errorf("%d driver calls after Close, want none", n)
	}
}

// TestCloseWaits: Close waits for the calls in flight before closing the
// driver, and a call started after Close never reaches the driver.
func TestCloseWaits(t *testing.T) {
	t.Parallel()
	entered := make(chan struct{})
	proceed := make(chan struct{})
	conn := &fakeConn{other: func(context.Context) error {
		close(entered)
		<-proceed
		return nil
	}}
	st := openFake(t, conn, fleetstore.WithTimeout(time.Hour))
	pinged := make(chan error, 1)
	go func() { pinged <- st.Ping(context.Background()) }()
	<-entered

	closed := make(chan error, 1)
	go func() { closed <- st.Close() }()
	// Give Close every chance to run early: a Close that does not wait
	// would close the driver under the running Ping now.
	time.Sleep(50 * time.Millisecond)
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while a Ping was in flight", err)
	default:
	}
	close(proceed)
	if err := <-pinged; err != nil {
		t.Errorf("ping in flight during Close: %v", err)
	}
	if err := <-closed; err != nil {
		t.Errorf("Close: %v", err)
	}
	if n := conn.inFlightAtClose.Load(); n != 0 {
		t.Errorf("driver closed with %d calls in flight", n)
	}
	if err := st.Ping(context.Background()); !errors.Is(err, fleetstore.ErrClosed) {
		t.Errorf("ping after Close: %v, want ErrClosed", err)
	}
	if n := conn.afterClose.Load(); n != 0 {
		t.Errorf("%d driver calls after Close", n)
	}
}

// TestConcurrentHitClose: under -race, Hits racing a Close either succeed
// or return ErrClosed, and the driver is never called after its Close.
func TestConcurrentHitClose(t *testing.T) {
	t.Parallel()
	for round := 0; round < 20; round++ {
		conn := &fakeConn{}
		st := openFake(t, conn)
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make(chan error, 8)
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for i := 0; ; i++ {
					var err error
					switch i % 3 {
					case 0:
						_, err = st.Hit(context.Background(), []fleetstore.Charge{testCharge}, &testClaim)
					case 1:
						err = st.Commit(context.Background(), testClaim)
					default:
						err = st.Ping(context.Background())
					}
					if errors.Is(err, fleetstore.ErrClosed) {
						return
					}
					if err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		close(start)
		for conn.calls.Load() < 100 {
			time.Sleep(time.Millisecond)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("round %d: %v, want nil or ErrClosed", round, err)
		}
		if n := conn.afterClose.Load(); n != 0 {
			t.Fatalf("round %d: %d driver calls after Close", round, n)
		}
		if n := conn.inFlightAtClose.Load(); n != 0 {
			t.Fatalf("round %d: driver closed with %d calls in flight", round, n)
		}
	}
}
