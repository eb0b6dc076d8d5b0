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
	"github.com/fleetstore/fleetstore/internal/checked"
	"github.com/fleetstore/fleetstore/internal/degraded"
	"github.com/fleetstore/fleetstore/internal/memstore"
	"github.com/fleetstore/fleetstore/internal/storeaccess"
	"github.com/fleetstore/fleetstore/observe"
)

// Store is an open fleet store. It is safe for concurrent use; open one per
// process and share it. Every method checks its arguments (CONTRACT §6),
// refuses after Close (T6), runs the driver within the call's budget (T1)
// and wraps the driver's error once, so that errors.Is matches this
// package's sentinels and errors.As still finds the driver's own error.
// Opened with WithFallback, it decides from this node's own state while
// the shared store is out and replays its commits when it is back
// (CONTRACT §8; Fallback gives the rules).
type Store struct {
	drv      driver.Driver
	conn     conn
	scheme   string
	display  string // the URL, password redacted, for log lines
	timeout  time.Duration
	log      *zap.Logger
	nonBlock bool
	canPeek  bool // the driver is a driver.Peeker: conn's Peek reaches it

	// down is set by the first call of an outage that the server did not
	// answer, and cleared by the first answer once no call has gone
	// unanswered for quietAfterOutage: one log line each way.
	// With a fallback, the fallback logs its transitions instead: every
	// error it returns is wrapped already (classified), and says nothing
	// here.
	down           atomic.Bool
	lastUnanswered atomic.Int64     // UnixNano of the last unanswered call
	now            func() time.Time // time.Now; tests move it

	// fb is the degraded mode (WithFallback, CONTRACT §8), which conn is
	// then; nil without. The call path does not look at it: Stats does.
	fb *degraded.Conn

	// obs is told of every call (WithObserver); nil without. sobs is obs
	// as a StoreObserver, detached at Close; nil when it is not one.
	obs  observe.Observer
	sobs observe.StoreObserver

	// Every call counts itself in calls while it runs; Close sets closed,
	// then waits for calls to drain. No lock is shared by calls, and a call
	// that meets a closing Store returns ErrClosed at once instead of
	// waiting for Close (T1, T6).
	calls   atomic.Int64
	closed  atomic.Bool
	drained chan struct{} // a token when the last call leaves a closed Store
	closeMu sync.Mutex    // serialises Close
}

// conn is the one seam of the Store's call path: every call of the Store
// is made on it, once, by the code below. It is the driver's Conn checked
// (internal/checked), or the degraded mode's wrapper of that
// (internal/degraded, WithFallback). Its Hit and Peek take the Store's
// charges, shadow marked, and return Results checked and completed in
// their terms (G10, G11); a settle returns one result per claim, those the
// degraded mode settled locally marked (degraded.Local). An error it
// returns that is wrapped already (an *opError: the degraded mode's) is
// returned as it is.
type conn = degraded.Shared

func newStore(d driver.Driver, dc driver.Conn, scheme, display string, timeout time.Duration,
	log *zap.Logger) *Store {
	_, nb := dc.(driver.NonBlocking)
	c := checked.New(dc)
	s := &Store{drv: d, conn: c, scheme: scheme, display: display, timeout: timeout, log: log,
		nonBlock: nb, canPeek: c.CanPeek(), drained: make(chan struct{}, 1), now: time.Now}
	return s
}

// degrade puts the degraded mode of f around the Store's conn (Open, before
// any call). It arms the budget of its calls to the shared store itself, so
// that a call it decides locally arms no timer: the Store only checks the
// context before it.
func (s *Store) degrade(f *Fallback, clock memstore.Clock) error {
	timeout, nb := s.timeout, s.nonBlock
	cfg := degraded.Config{Share: f.share(), Nodes: f.Nodes, OutboxSize: f.OutboxSize,
		LocalClaims: f.LocalClaims, RecentCommits: f.RecentCommits, OutboxDir: f.OutboxDir,
		Logger: s.log, Scheme: s.scheme, URL: s.display,
		Timeout: timeout, Clock: clock, Now: func() time.Time { return s.now() },
		Budget: func(ctx context.Context, op string) (context.Context, context.CancelFunc, error) {
			ctx, cancel, err := budget(ctx, timeout, nb)
			if err != nil {
				return nil, nil, &opError{op: op, err: err}
			}
			return ctx, cancel, nil
		},
		Classify: func(ctx context.Context, op string, err error) (bool, bool, error) {
			f, kind := classify(ctx, err)
			return f == answered, degradable(kind, f), opErr(op, kind, err)
		}}
	if on := f.OnConflict; on != nil {
		cfg.OnConflict = func(c Claim, holder string, at time.Time) {
			on(Conflict{Claim: c, Holder: holder, QueuedAt: at})
		}
	}
	if on := f.OnStateChange; on != nil {
		cfg.OnStateChange = func(degraded bool, cause error, st observe.Stats) {
			on(StateChange{Degraded: degraded, Cause: cause, Stats: st})
		}
	}
	if s.obs != nil {
		cfg.Observe = s.obs.Observe
	}
	fb, err := degraded.New(s.conn, cfg)
	if err != nil {
		return err
	}
	s.fb, s.conn, s.nonBlock = fb, fb, true
	return nil
}

func init() {
	storeaccess.Driver = func(s any) driver.Driver { return s.(*Store).drv }
}

// Hit charges every bucket in charges and, when claim is not nil, claims its
// key, in one round trip (CONTRACT §3, §4: G1–G10, C1–C4).
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
// Whatever the outcome, res.Quota() holds one Bucket per charge, in the
// charges' order: its reset-after and headroom after the decision (whole
// µs), and for RateLimited whether it denied the Hit (G10). Turn them into
// units with Limit.Remaining, into response fields with headers.Write
// (package headers).
//
// Every charge and the claim share one tenant; a Hit takes at most
// MaxCharges charges. A Hit with no charges and no claim returns OK without
// a round trip (the context's error when it is already done, T1).
// Increment and Capacity are truncated to whole microseconds.
//
// With a fallback (WithFallback, CONTRACT §8), a Hit the shared store
// cannot decide for an outage (ErrTimeout, ErrUnavailable) is decided from
// this node's local store at its share of every limit, and Result.Local
// says so; while the breaker is open, Hits go there at once. ErrInvalid,
// ErrOverCapacity, ErrClosed and the caller's own cancellation or passed
// deadline are returned as without one.
//
// Errors: ErrInvalid (naming the field), ErrOverCapacity, ErrTimeout,
// ErrUnavailable, ErrClosed.
func (s *Store) Hit(ctx context.Context, charges []Charge, claim *Claim) (Result, error) {
	if s.obs == nil {
		return s.hit(ctx, charges, claim)
	}
	start := time.Now()
	res, err := s.hit(ctx, charges, claim)
	s.observeHit(ctx, start, len(charges), claim != nil, &res, err)
	return res, err
}

// hit is Hit without the observer.
func (s *Store) hit(ctx context.Context, charges []Charge, claim *Claim) (res Result, err error) {
	if s.closed.Load() {
		return Result{}, &opError{op: "hit", err: ErrClosed}
	}
	tenant, fractional, err := checkCharges(charges)
	if err == nil && claim != nil {
		err = checkClaim(-1, claim, true, true)
		if err == nil && tenant != "" && claim.Tenant != tenant {
			err = driver.Invalid("claim.tenant",
				"every charge and the claim of one Hit must share one tenant")
		}
	}
	if err != nil {
		return Result{}, &opError{op: "hit", err: err}
	}
	if len(charges) == 0 && claim == nil {
		if err := ctx.Err(); err != nil {
			return Result{}, &opError{op: "hit", err: doneErr(err)}
		}
		return Result{Outcome: OK}, nil
	}
	if fractional {
		charges = truncated(charges)
	}
	err = s.call(ctx, "hit", func(ctx context.Context) (err error) {
		res, err = s.conn.Hit(ctx, charges, claim)
		return err
	})
	if err != nil {
		return Result{}, err
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
// Commit of no claims returns nil (with a context already done, its
// error: T1).
//
// With a fallback (CONTRACT §8), a claim the shared store cannot be
// reached to commit is committed in the local store and queued in the
// outbox, to be replayed when the store is back: its Commit is nil. One
// the outbox has no room for fails with the outage's error.
//
// Errors: ErrInvalid (nothing is sent), ErrClaimLost, ErrTimeout,
// ErrUnavailable, ErrClosed.
func (s *Store) Commit(ctx context.Context, claims ...Claim) error {
	return s.observedSettle(ctx, observe.OpCommit, claims, s.conn.Commit)
}

// Release gives up pending claims after the hook failed to become durable
// (CONTRACT §4, C5–C8):
//
//   - pending for the same hook: deleted;
//   - committed by the same hook: no change, ErrAlreadyCommitted;
//   - absent or expired: no change, no error;
//   - held by another hook: no change, ErrClaimLost naming the holder.
//
// A claim needs only its identity and HookID here: its TTLs are not used
// and not checked. Results per claim and errors as for Commit. With a
// fallback (CONTRACT
// §8), a claim the shared store cannot be reached to release is released
// in the local store only, with the local store's result: a pending claim
// in the shared store then expires by its PendingTTL.
func (s *Store) Release(ctx context.Context, claims ...Claim) error {
	return s.observedSettle(ctx, observe.OpRelease, claims, s.conn.Release)
}

// settleFunc is a driver's Commit or Release.
type settleFunc = func(context.Context, []Claim) ([]error, error)

// observedSettle is settle, reported to the observer.
func (s *Store) observedSettle(ctx context.Context, op observe.Op, claims []Claim,
	call settleFunc) error {
	if s.obs == nil {
		_, err := s.settle(ctx, op.String(), claims, call)
		return err
	}
	start := time.Now()
	local, err := s.settle(ctx, op.String(), claims, call)
	s.observeSettle(ctx, op, start, len(claims), local, err)
	return err
}

// settle is Commit or Release; local reports claims the degraded mode
// settled in the local store.
func (s *Store) settle(ctx context.Context, op string, claims []Claim,
	call settleFunc) (local bool, err error) {
	if !s.enter() {
		return false, &opError{op: op, err: ErrClosed}
	}
	defer s.leave()
	for i := range claims {
		if err := checkSettle(op, i, &claims[i]); err != nil {
			return false, &opError{op: op, err: err}
		}
	}
	if len(claims) == 0 {
		if err := ctx.Err(); err != nil {
			return false, &opError{op: op, err: doneErr(err)}
		}
		return false, nil
	}
	ctx, cancel, err := s.budget(ctx)
	if err != nil {
		return false, &opError{op: op, err: err}
	}
	defer cancel()
	errs, err := call(ctx, claims)
	if err != nil {
		return false, s.failed(ctx, op, err)
	}
	local, failed := s.settled(ctx, op, claims, errs)
	return local, errors.Join(failed...)
}

// settled turns a batch settle's results into one *ClaimError per failed
// claim (C10), in the claims' order, and keeps the reachability log; local
// reports claims settled in the local store (degraded.Local).
func (s *Store) settled(ctx context.Context, op string, claims []Claim, errs []error) (
	local bool, failed []error) {
	reached := false
	for i, err := range errs {
		if l, ok := err.(*degraded.Local); ok {
			if local, err = true, l.Err; err == nil {
				continue
			}
		} else if err == nil {
			reached = true
			continue
		}
		c := &claims[i]
		f, e := s.classified(ctx, op, err)
		reached = reached || f == answered
		if f == outage {
			s.unreached(err)
		}
		failed = append(failed, &ClaimError{Index: i, Tenant: c.Tenant, SourceID: c.SourceID,
			Key: c.Key, Err: e})
	}
	if reached {
		s.reached()
	}
	return local, failed
}

// Reset forgets every bucket of tenant, of every kind, and nothing of any
// other tenant (G5): the next charges meet full buckets. Claims are kept.
//
// Errors: ErrInvalid, ErrTimeout, ErrUnavailable, ErrClosed.
//
// With a fallback (CONTRACT §8) the local store's buckets of tenant are
// forgotten too; while the breaker is open the shared store is not tried
// and Reset returns ErrUnavailable at once.
func (s *Store) Reset(ctx context.Context, tenant string) error {
	if s.obs == nil {
		return s.reset(ctx, tenant)
	}
	start := time.Now()
	err := s.reset(ctx, tenant)
	s.observe(ctx, observe.OpReset, start, err)
	return err
}

func (s *Store) reset(ctx context.Context, tenant string) error {
	if s.closed.Load() {
		return &opError{op: "reset", err: ErrClosed}
	}
	if err := checkPart("tenant", tenant, maxPartLen); err != nil {
		return &opError{op: "reset", err: err}
	}
	return s.call(ctx, "reset", func(ctx context.Context) error { return s.conn.Reset(ctx, tenant) })
}

// Ping checks that the store answers within the budget. With a fallback
// it asks the shared store whatever the breaker says (CONTRACT §8), and a
// Ping that fails for an outage opens the breaker.
//
// Errors: ErrTimeout, ErrUnavailable, ErrClosed.
func (s *Store) Ping(ctx context.Context) error {
	if s.obs == nil {
		return s.call(ctx, "ping", s.conn.Ping)
	}
	start := time.Now()
	err := s.call(ctx, "ping", s.conn.Ping)
	s.observe(ctx, observe.OpPing, start, err)
	return err
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
	f, e := s.classified(ctx, op, err)
	switch f {
	case answered:
		s.reached()
	case outage:
		s.unreached(err)
	}
	return e
}

// classified is err classified and wrapped once for op; an error wrapped
// already (the degraded mode classifies what it returns: its own log
// says what it means of the store) is returned as it is, as wrapped.
func (s *Store) classified(ctx context.Context, op string, err error) (fault, error) {
	if oe := (*opError)(nil); errors.As(err, &oe) {
		return wrapped, err
	}
	f, kind := classify(ctx, err)
	return f, opErr(op, kind, err)
}

// degradable reports an error a fallback decides locally on (CONTRACT §8):
// ErrTimeout or ErrUnavailable, the server silent or refusing (an error
// reply included); never an outcome, an invalid argument or the caller's
// own cancellation.
func degradable(kind error, f fault) bool {
	return f == outage || f == answered && kind == ErrUnavailable
}

// quietAfterOutage is how long after the last unanswered call an answer
// may end an outage in the log: a partial outage (one cluster master or
// one memcached server down) fails some calls and answers others, and
// must log one warning, not one line per call.
const quietAfterOutage = time.Second

// unreached records a call the server did not answer; the first of an
// outage logs a warning with its cause.
func (s *Store) unreached(cause error) {
	s.lastUnanswered.Store(s.now().UnixNano())
	if !s.down.Load() && s.down.CompareAndSwap(false, true) {
		s.log.Warn("fleetstore: store unreachable; calls fail until it answers again",
			zap.String("scheme", s.scheme), zap.String("url", s.display), zap.Error(cause))
	}
}

// reached records an answer; the first after an outage, once no call has
// gone unanswered for quietAfterOutage, is logged.
func (s *Store) reached() {
	if !s.down.Load() {
		return
	}
	if s.now().UnixNano()-s.lastUnanswered.Load() < int64(quietAfterOutage) {
		return
	}
	if s.down.CompareAndSwap(true, false) {
		s.log.Info("fleetstore: store reachable again",
			zap.String("scheme", s.scheme), zap.String("url", s.display))
	}
}

// Close releases every connection and goroutine of the Store (T4). It waits
// for calls in flight, which end within their budget; calls made while it
// waits return ErrClosed at once. After Close every method returns
// ErrClosed; closing twice returns nil (T6). With a fallback, Close stops
// its probe and makes one last replay of the outbox within one budget
// (the degraded mode's Close, before the driver's);
// commits still queued after it are logged (their count) and lost, their
// claims left to expire by PendingTTL, or kept in Fallback.OutboxDir for
// the next Open when set (CONTRACT §8).
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
	if s.sobs != nil {
		s.sobs.Detach()
	}
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
	return budget(ctx, s.timeout, s.nonBlock)
}

// budget is ctx bounded by timeout; only checked when the conn's calls
// never block (or arm their own budget: the degraded mode).
func budget(ctx context.Context, timeout time.Duration, nonBlock bool) (context.Context,
	context.CancelFunc, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, doneErr(err)
	}
	if nonBlock {
		return ctx, noCancel, nil
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= timeout {
		return ctx, noCancel, nil // the caller's deadline is the budget: no timer of ours
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	return ctx, cancel, nil
}

// doneErr is the error of a call whose context was done before it began:
// ErrTimeout for a passed deadline (T1), the cancellation as it is.
func doneErr(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: %w", ErrTimeout, err)
	}
	return err
}

// Stats returns a snapshot of the Store's degraded mode: whether it is
// degraded, the outbox's length and the counters of CONTRACT §8. A Store
// opened without a fallback returns zero Stats. Safe to call at any time,
// also after Close.
func (s *Store) Stats() observe.Stats {
	if s.fb == nil {
		return observe.Stats{}
	}
	return s.fb.Stats()
}
