package fleetstore

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/internal/checked"
	"github.com/fleetstore/fleetstore/internal/fault"
	"github.com/fleetstore/fleetstore/observe"
)

// Store is an open fleet store. It is safe for concurrent use; open one per
// process and share it. Every method checks its arguments (CONTRACT §6),
// refuses after Close (T6), runs the driver within the call's budget (T1)
// and wraps the driver's error once, so that errors.Is matches this
// package's sentinels and errors.As still finds the driver's own error.
// Opened with WithFallback, it decides from this node's own state while
// the shared store is out and replays its commits when it is back
// (CONTRACT §8 gives the rules; Fallback, the settings).
type Store struct {
	drv     driver.Driver
	conn    conn
	commit  settleFunc // conn's Commit, saying where it settled (localSettler)
	release settleFunc // conn's Release, likewise
	scheme  string
	display string // the URL, password redacted, for log lines
	timeout time.Duration
	log     *zap.Logger
	timer   bool // conn's calls need a budget timer (conn.NeedsTimer)
	canPeek bool // the driver is a driver.Peeker: conn's Peek reaches it

	// down is set by the first call of an outage that the server did not
	// answer, and cleared by the first answer once no call has gone
	// unanswered for quietAfterOutage: one log line each way. With a
	// fallback, the degraded mode logs its own transitions instead.
	down           atomic.Bool
	lastUnanswered atomic.Int64     // UnixNano of the last unanswered call
	now            func() time.Time // time.Now; tests move it

	// fb is the degraded mode (WithFallback, CONTRACT §8), which conn is
	// then; nil without. The call path does not look at it.
	fb fallback

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
// (internal/checked), or the degraded mode's decorator of that
// (WithFallback). Its Hit and Peek take the Store's charges, shadow
// marked, and return Results checked and completed in their terms (G10,
// G11). Its errors are a driver's: the Store classifies and wraps each
// once (internal/fault).
type conn interface {
	driver.Conn
	driver.Peeker
	// NeedsTimer reports whether a call needs the Store's budget timer
	// (T1): false for a conn whose calls never wait, or that bounds its
	// own calls to the store.
	NeedsTimer() bool
}

// localSettler is the optional interface of a conn that settles claims
// in a local store too (the degraded mode): local reports a Commit or
// Release with any claim settled there (observe.Event.Local). The Store
// calls it in place of the conn's Commit and Release.
type localSettler interface {
	CommitWhere(ctx context.Context, claims []driver.Claim) (errs []error, local bool, err error)
	ReleaseWhere(ctx context.Context, claims []driver.Claim) (errs []error, local bool, err error)
}

// newStore is the Store of driver d's Conn, dc, checked.
func newStore(d driver.Driver, dc driver.Conn, scheme, display string, timeout time.Duration,
	log *zap.Logger) *Store {
	c := checked.New(dc)
	s := &Store{drv: d, scheme: scheme, display: display, timeout: timeout, log: log,
		canPeek: c.CanPeek(), drained: make(chan struct{}, 1), now: time.Now}
	s.use(c)
	return s
}

// use makes c the Store's conn (at Open, before any call): whether its
// calls need a budget timer, how it settles and whether it is the
// degraded mode are read off it, by its optional interfaces.
func (s *Store) use(c conn) {
	s.conn, s.timer = c, c.NeedsTimer()
	s.commit, s.release = unsaid(c.Commit), unsaid(c.Release)
	if ls, ok := c.(localSettler); ok {
		s.commit, s.release = ls.CommitWhere, ls.ReleaseWhere
	}
	s.fb, _ = c.(fallback)
}

// unsaid is a conn's Commit or Release, which settles nothing locally.
func unsaid(f func(context.Context, []driver.Claim) ([]error, error)) settleFunc {
	return func(ctx context.Context, claims []driver.Claim) ([]error, bool, error) {
		errs, err := f(ctx, claims)
		return errs, false, err
	}
}

// Driver returns the driver the Store was opened with (by Open or
// OpenDriver), as sql.DB.Driver does: the conformance suite and a
// driver's own tests read it.
func (s *Store) Driver() driver.Driver { return s.drv }

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
// A quota's charge (Limit.Charge of NewQuota, Charge.Window) counts
// units in the calendar window holding the store's clock, decided with
// the bucket charges, all or nothing (CONTRACT §3.2, Q1–Q6); its state
// reports the units used and the time to the window's end.
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
// ErrUnavailable (also a quota's windows that do not hold the store's
// clock: this node's clock is off by more than a window), ErrClosed.
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
		return Result{}, fault.New("hit", ErrClosed)
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
		return Result{}, fault.New("hit", err)
	}
	if len(charges) == 0 && claim == nil {
		if err := ctx.Err(); err != nil {
			return Result{}, fault.New("hit", fault.Done(err))
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
	return s.observedSettle(ctx, observe.OpCommit, claims, s.commit)
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
	return s.observedSettle(ctx, observe.OpRelease, claims, s.release)
}

// settleFunc is a conn's Commit or Release: one result per claim, and
// whether any claim was settled in the degraded mode's local store.
type settleFunc = func(context.Context, []Claim) (errs []error, local bool, err error)

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
		return false, fault.New(op, ErrClosed)
	}
	defer s.leave()
	for i := range claims {
		if err := checkSettle(op, i, &claims[i]); err != nil {
			return false, fault.New(op, err)
		}
	}
	if len(claims) == 0 {
		if err := ctx.Err(); err != nil {
			return false, fault.New(op, fault.Done(err))
		}
		return false, nil
	}
	ctx, cancel, err := s.budget(ctx)
	if err != nil {
		return false, fault.New(op, err)
	}
	defer cancel()
	errs, local, err := call(ctx, claims)
	if err != nil {
		return false, s.failed(ctx, op, err)
	}
	return local, errors.Join(s.settled(ctx, op, claims, errs)...)
}

// settled turns a batch settle's results into one *ClaimError per failed
// claim (C10), in the claims' order, and keeps the reachability log.
func (s *Store) settled(ctx context.Context, op string, claims []Claim, errs []error) (
	failed []error) {
	reached := false
	for i, err := range errs {
		if err == nil {
			reached = true
			continue
		}
		c := &claims[i]
		f, kind := fault.Classify(ctx, err)
		reached = reached || f == fault.Answered
		if f == fault.Outage {
			s.unreached(err)
		}
		failed = append(failed, &ClaimError{Index: i, Tenant: c.Tenant, SourceID: c.SourceID,
			Key: c.Key, Err: fault.Wrap(op, kind, err)})
	}
	if reached {
		s.reached()
	}
	return failed
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
		return fault.New("reset", ErrClosed)
	}
	if err := checkPart("tenant", tenant, maxPartLen); err != nil {
		return fault.New("reset", err)
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
		return fault.New(op, ErrClosed)
	}
	defer s.leave()
	ctx, cancel, err := s.budget(ctx)
	if err != nil {
		return fault.New(op, err)
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
	f, kind := fault.Classify(ctx, err)
	switch f {
	case fault.Answered:
		s.reached()
	case fault.Outage:
		s.unreached(err)
	}
	return fault.Wrap(op, kind, err)
}

// quietAfterOutage is how long after the last unanswered call an answer
// may end an outage in the log: a partial outage (one cluster master or
// one memcached server down) fails some calls and answers others, and
// must log one warning, not one line per call.
const quietAfterOutage = time.Second

// unreached records a call the server did not answer; the first of an
// outage logs a warning with its cause. With a fallback the degraded mode
// logs its breaker's transitions instead, and this logs nothing.
func (s *Store) unreached(cause error) {
	if s.fb != nil {
		return
	}
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
		return fault.New("close", err)
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

// budget returns ctx bounded by the store's timeout (T1). A context that is
// already done fails at once, without a driver call.
func (s *Store) budget(ctx context.Context) (context.Context, context.CancelFunc, error) {
	return fault.Budget(ctx, s.timeout, s.timer)
}

// FallbackStats returns a snapshot of the Store's degraded mode
// (WithFallback, CONTRACT §8): whether it decides from this node now, the
// outbox's length, and its counters over the Store's life (observe.Stats
// gives each). A Store opened without a fallback returns zero stats. Safe
// to call at any time, also after Close.
func (s *Store) FallbackStats() observe.Stats {
	if s.fb == nil {
		return observe.Stats{}
	}
	return s.fb.Stats()
}
