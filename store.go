package fleetstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/fleetstore/fleetstore/driver"
)

// Store is an open fleet store. It is safe for concurrent use; open one per
// process and share it. Every method checks its arguments (CONTRACT §6),
// refuses after Close (T6), runs the driver within the call's budget (T1)
// and wraps the driver's error once, so that errors.Is matches this
// package's sentinels and errors.As still finds the driver's own error.
type Store struct {
	drv      driver.Driver
	conn     driver.Conn
	scheme   string
	display  string // the URL, password redacted, for log lines
	timeout  time.Duration
	log      *zap.Logger
	nonBlock bool

	// down is set by the first call of an outage that the server did not
	// answer, and cleared by the next answer: one log line each way.
	down atomic.Bool

	// Every call counts itself in calls while it runs; Close sets closed,
	// then waits for calls to drain. No lock is shared by calls, and a call
	// that meets a closing Store returns ErrClosed at once instead of
	// waiting for Close (T1, T6).
	calls   atomic.Int64
	closed  atomic.Bool
	drained chan struct{} // a token when the last call leaves a closed Store
	closeMu sync.Mutex    // serialises Close
}

func newStore(d driver.Driver, conn driver.Conn, scheme, display string, timeout time.Duration, log *zap.Logger) *Store {
	_, nb := conn.(driver.NonBlocking)
	return &Store{drv: d, conn: conn, scheme: scheme, display: display, timeout: timeout, log: log, nonBlock: nb, drained: make(chan struct{}, 1)}
}

// Driver returns the Store's driver, as sql.DB.Driver does: a caller can
// look for an optional interface on it (driver.ExpiryGranularity).
func (s *Store) Driver() driver.Driver { return s.drv }

// Hit charges every bucket in charges and, when claim is not nil, claims its
// key, in one round trip (CONTRACT §3, §4: G1–G9, C1–C4).
//
//   - OK: every charge was taken; the claim, if any, is pending for
//     claim.HookID until Commit, Release or PendingTTL. A retry by the same
//     hook of a claim it holds pending is OK and charges nothing.
//   - RateLimited: a charge does not conform; nothing was written.
//     RetryAfter is the longest wait of the denied charges (whole ms ≥ 1ms).
//   - Duplicate: the key is committed by Result.HookID; nothing charged.
//   - Pending: another hook holds the key; RetryAfter is its remaining
//     pending time; nothing charged.
//
// Every charge and the claim share one tenant. A Hit with no charges and no
// claim returns OK without a round trip. Increment and Capacity are
// truncated to whole microseconds.
//
// Errors: ErrInvalid (naming the field), ErrOverCapacity, ErrTimeout,
// ErrUnavailable, ErrClosed.
func (s *Store) Hit(ctx context.Context, charges []Charge, claim *Claim) (Result, error) {
	tenant, fractional, err := checkCharges(charges)
	if err == nil && claim != nil {
		err = checkClaim(-1, claim, true, true)
		if err == nil && tenant != "" && claim.Tenant != tenant {
			err = driver.Invalid("claim.tenant", "every charge and the claim of one Hit must share one tenant")
		}
	}
	if err != nil {
		return Result{}, &opError{op: "hit", err: err}
	}
	if len(charges) == 0 && claim == nil {
		if s.closed.Load() {
			return Result{}, &opError{op: "hit", err: ErrClosed}
		}
		return Result{Outcome: OK}, nil
	}
	if fractional {
		charges = truncated(charges)
	}
	var res Result
	err = s.call(ctx, "hit", func(ctx context.Context) (err error) {
		res, err = s.conn.Hit(ctx, charges, claim)
		return err
	})
	if err != nil {
		return Result{}, err
	}
	if err := checkResult(res); err != nil {
		return Result{}, &opError{op: "hit", kind: ErrUnavailable, err: err}
	}
	return res, nil
}

// Commit settles claims as committed (CONTRACT §4, C5–C8), each matched on
// (tenant, source_id, key) and hook_id:
//
//   - pending for the same hook: committed, expiring TTL from now;
//   - committed by the same hook: no change, no error;
//   - absent or expired: committed for this hook (the hook is durable);
//   - held by another hook: no change, ErrClaimLost naming the holder.
//
// The claims are sent together (one round trip per store shard where the
// backend has scripts; memcached settles each claim by compare-and-swap).
// Each claim gets its own result: the good ones are settled even when
// others fail, and the failures are joined, each naming its claim (C10).
// Commit of no claims returns nil.
//
// Errors: ErrInvalid (nothing is sent), ErrClaimLost, ErrTimeout,
// ErrUnavailable, ErrClosed.
func (s *Store) Commit(ctx context.Context, claims ...Claim) error {
	return s.settle(ctx, "commit", claims, s.conn.Commit)
}

// Release gives up pending claims after the hook failed to become durable
// (CONTRACT §4, C5–C8):
//
//   - pending for the same hook: deleted;
//   - committed by the same hook: no change, ErrAlreadyCommitted;
//   - absent or expired: no change, no error;
//   - held by another hook: no change, ErrClaimLost naming the holder.
//
// Results per claim and errors as for Commit.
func (s *Store) Release(ctx context.Context, claims ...Claim) error {
	return s.settle(ctx, "release", claims, s.conn.Release)
}

func (s *Store) settle(ctx context.Context, op string, claims []Claim, call func(context.Context, []Claim) ([]error, error)) error {
	for i := range claims {
		if err := checkSettle(op, i, &claims[i]); err != nil {
			return &opError{op: op, err: err}
		}
	}
	if !s.enter() {
		return &opError{op: op, err: ErrClosed}
	}
	defer s.leave()
	if len(claims) == 0 {
		return nil
	}
	ctx, cancel, err := s.budget(ctx)
	if err != nil {
		return &opError{op: op, err: err}
	}
	defer cancel()
	errs, err := call(ctx, claims)
	if err != nil {
		return s.failed(ctx, op, err)
	}
	if len(errs) != len(claims) {
		return &opError{op: op, kind: ErrUnavailable, err: fmt.Errorf("driver returned %d results for %d claims", len(errs), len(claims))}
	}
	var failed []error
	reached := false
	for i, err := range errs {
		if err == nil {
			reached = true
			continue
		}
		c := &claims[i]
		f, kind := classify(ctx, err)
		reached = reached || f == answered
		if f == outage {
			s.unreached(err)
		}
		failed = append(failed, &ClaimError{Index: i, Tenant: c.Tenant, SourceID: c.SourceID, Key: c.Key, Err: &opError{op: op, kind: kind, err: err}})
	}
	if reached {
		s.reached()
	}
	return errors.Join(failed...)
}

// Reset forgets every bucket of tenant, of every kind, and nothing of any
// other tenant (G5): the next charges meet full buckets. Claims are kept.
//
// Errors: ErrInvalid, ErrTimeout, ErrUnavailable, ErrClosed.
func (s *Store) Reset(ctx context.Context, tenant string) error {
	if err := checkPart("tenant", tenant, maxPartLen); err != nil {
		return &opError{op: "reset", err: err}
	}
	return s.call(ctx, "reset", func(ctx context.Context) error { return s.conn.Reset(ctx, tenant) })
}

// Ping checks that the store answers within the budget.
//
// Errors: ErrTimeout, ErrUnavailable, ErrClosed.
func (s *Store) Ping(ctx context.Context) error {
	return s.call(ctx, "ping", s.conn.Ping)
}

// call runs f, one driver call: counted in against Close (T6), within the
// call's budget (T1), its error classified and wrapped once.
func (s *Store) call(ctx context.Context, op string, f func(context.Context) error) error {
	if !s.enter() {
		return &opError{op: op, err: ErrClosed}
	}
	defer s.leave()
	ctx, cancel, err := s.budget(ctx)
	if err != nil {
		return &opError{op: op, err: err}
	}
	defer cancel()
	if err := f(ctx); err != nil {
		return s.failed(ctx, op, err)
	}
	s.reached()
	return nil
}

// failed classifies err, the failure of a whole call, wraps it once, and
// keeps the Store's reachability log.
func (s *Store) failed(ctx context.Context, op string, err error) error {
	f, kind := classify(ctx, err)
	switch f {
	case answered:
		s.reached()
	case outage:
		s.unreached(err)
	}
	return &opError{op: op, kind: kind, err: err}
}

// unreached records a call the server did not answer; the first of an
// outage logs a warning with its cause.
func (s *Store) unreached(cause error) {
	if !s.down.Load() && s.down.CompareAndSwap(false, true) {
		s.log.Warn("fleetstore: store unreachable; calls fail until it answers again",
			zap.String("scheme", s.scheme), zap.String("url", s.display), zap.Error(cause))
	}
}

// reached records an answer; the first after an outage is logged.
func (s *Store) reached() {
	if s.down.Load() && s.down.CompareAndSwap(true, false) {
		s.log.Info("fleetstore: store reachable again", zap.String("scheme", s.scheme), zap.String("url", s.display))
	}
}

// Close releases every connection and goroutine of the Store (T4). It waits
// for calls in flight, which end within their budget; calls made while it
// waits return ErrClosed at once. After Close every method returns
// ErrClosed; closing twice returns nil (T6).
func (s *Store) Close() error {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.closed.Swap(true) {
		return nil
	}
	for s.calls.Load() != 0 {
		<-s.drained
	}
	err := s.conn.Close()
	s.log.Debug("store closed", zap.String("scheme", s.scheme))
	if err != nil {
		return &opError{op: "close", err: err}
	}
	return nil
}

// enter counts a call in; false (not counted) once the Store is closed or
// closing.
func (s *Store) enter() bool {
	s.calls.Add(1)
	if s.closed.Load() {
		s.leave()
		return false
	}
	return true
}

// leave counts a call out and wakes Close when it was the last one.
func (s *Store) leave() {
	if s.calls.Add(-1) == 0 && s.closed.Load() {
		select {
		case s.drained <- struct{}{}:
		default: // a token is already waiting
		}
	}
}

var noCancel = context.CancelFunc(func() {})

// budget returns ctx bounded by the store's timeout (T1). A context that is
// already done fails at once, without a driver call.
func (s *Store) budget(ctx context.Context) (context.Context, context.CancelFunc, error) {
	if err := ctx.Err(); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, nil, fmt.Errorf("%w: %w", ErrTimeout, err)
		}
		return nil, nil, err
	}
	if s.nonBlock {
		return ctx, noCancel, nil
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= s.timeout {
		return ctx, noCancel, nil // the caller's deadline is the budget: no timer of ours
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	return ctx, cancel, nil
}

func checkResult(r Result) error {
	switch r.Outcome {
	case OK:
		return nil
	case Duplicate:
		if r.HookID == "" {
			return errors.New("driver returned duplicate without the committer's hook_id")
		}
		return nil
	case Pending, RateLimited:
		if r.RetryAfter < time.Millisecond || r.RetryAfter%time.Millisecond != 0 {
			return fmt.Errorf("driver returned %v with retry-after %v (want whole ms ≥ 1ms)", r.Outcome, r.RetryAfter)
		}
		return nil
	}
	return fmt.Errorf("driver returned invalid outcome %d", int(r.Outcome))
}
