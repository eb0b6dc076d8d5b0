// Package degraded is a Store's degraded mode (CONTRACT §8): the breaker,
// the node-local store at this node's share of every limit, the outbox and
// the worker that probes the shared store and replays the outbox, the
// conflict log, and the look at claims taken locally after the switch
// back. Its Conn wraps the shared store's Conn (internal/checked) and is
// the Store's conn: the Store's call path is written once, on it. What it
// needs of the Store it gets at New, as values and functions (Config);
// the root package configures it (fleetstore.Fallback, WithFallback) and
// cannot be imported from here.
package degraded

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/gcra"
	"github.com/fleetstore/fleetstore/internal/checked"
	"github.com/fleetstore/fleetstore/internal/memstore"
	"github.com/fleetstore/fleetstore/internal/outboxlog"
	"github.com/fleetstore/fleetstore/observe"
)

// The local store: a memory driver of the fallback's own, so that no other
// Store can open it, on which it is memory://fallback.
const (
	localName   = "fallback"
	localPrefix = "local"
)

// Shared is the shared store's Conn as the Store calls it: Hit and Peek
// take the Store's charges and return checked Results (internal/checked).
type Shared interface {
	driver.Conn
	driver.Peeker
}

// Config is what the degraded mode needs of the Store (fleetstore.Fallback
// gives the rules; the Store has checked every field).
type Config struct {
	Share       Share // this node's share of every limit
	Nodes       int   // the fleet's size, 0 when Share was given as a fraction (logged)
	OutboxSize  int   // commits the outbox holds, > 0
	LocalClaims int   // claims the local store holds, > 0
	// RecentCommits is how many of this node's recent commits the index
	// holds (recent), > 0.
	RecentCommits int
	// OutboxDir, when set, keeps the outbox on disk too (internal/outboxlog):
	// New replays what it holds before deciding shared.
	OutboxDir string
	// OnConflict, when set, is told of every replayed commit that met
	// another hook's committed claim: the commit as queued, the holder's
	// hook_id and when Commit queued it.
	OnConflict func(c driver.Claim, holder string, queuedAt time.Time)
	// OnStateChange, when set, is told when the Store goes degraded (with
	// the outage's cause) and when it decides shared again.
	OnStateChange func(degraded bool, cause error, st observe.Stats)

	Logger      *zap.Logger
	Scheme, URL string        // for log lines; URL redacted
	Timeout     time.Duration // the Store's per-call budget
	// Budget bounds a call to the shared store by the Store's budget (T1);
	// its error is the Store's for op.
	Budget func(ctx context.Context, op string) (context.Context, context.CancelFunc, error)
	// Classify sorts err, a shared store call's failure within ctx, as the
	// Store does: answered says the server answered (an outcome, an error
	// reply); degrade, that it is an outage to decide locally on
	// (ErrTimeout, ErrUnavailable); e is err as the Store returns it for op
	// (wrapped once: the Store returns it as it is).
	Classify func(ctx context.Context, op string, err error) (answered, degrade bool, e error)
	// Observe, when set, is told of every replayed batch (observe.OpReplay).
	Observe func(context.Context, observe.Event)
	Clock   memstore.Clock   // the local store's µs; nil: memstore.Monotonic
	Now     func() time.Time // the conflict log's clock; nil: time.Now
}

// Local marks a claim's result in a settle's answer that the local store
// decided (a commit queued, a release made locally): Err is its error,
// nil when it was settled. The Store counts such a settle as local
// (observe.Event.Local) and reads Err; no driver returns one.
type Local struct{ Err error }

func (l *Local) Error() string {
	if l.Err == nil {
		return "settled locally"
	}
	return l.Err.Error()
}

// Unwrap returns Err.
func (l *Local) Unwrap() error { return l.Err }

// settledLocally is the Local of a claim settled in the local store.
var settledLocally = &Local{}

// Conn is a Store's degraded mode (CONTRACT §8) around the shared store's
// Conn: the breaker, the node-local store, the outbox and the worker that
// probes the shared store and replays it. Every error it returns is
// wrapped as the Store returns it (Config.Classify, Config.Budget).
type Conn struct {
	shared   Shared
	cfg      Config
	log      *zap.Logger
	budget   func(context.Context, string) (context.Context, context.CancelFunc, error)
	classify func(context.Context, string, error) (bool, bool, error)
	now      func() time.Time
	share    Share
	mem      *memstore.Driver
	local    driver.Conn // never blocks: called without a budget
	recent   *recent     // this node's recent commits

	// Read by every call; written once an outage (or a count). Kept off
	// the cache line of localDecisions, which every local Hit writes.
	degraded       atomic.Bool // the breaker: calls go local
	obsPanicked    atomic.Bool // the observer panicked on a replay event: logged once
	claimsFull     atomic.Bool // the local store holds cfg.LocalClaims claims
	checkEvery     uint64      // local decisions between two counts of the local store's claims
	_              [64]byte
	localDecisions atomic.Uint64
	_              [56]byte

	// pendingUntil is the local clock's µs until which a claim taken
	// locally may still be pending here: after an outage, a Hit decided
	// shared first looks for such a claim (Peek), so that a provider's
	// retry meeting this node right after the switch back is Pending, not
	// a second admission of the hook the outage admitted locally.
	pendingUntil atomic.Int64
	clock        memstore.Clock

	fullLogged    atomic.Bool // "outbox full", once an outage
	refusedLogged atomic.Bool // "replayed commits refused", once an outage

	// stateMu orders the transitions and their log lines.
	stateMu sync.Mutex
	cause   error         // of the current outage
	since   time.Time     // of the current outage
	atTrip  observe.Stats // the counters when it began

	mu      sync.Mutex // box, running
	box     outbox
	running bool // a worker goroutine runs (ensureWorker)

	disk       *outboxlog.Log // the outbox's log on disk (Config.OutboxDir), or nil
	diskLogged atomic.Bool    // its first failure was logged: once a Store

	stopCtx context.Context // done at Close: the worker ends
	stop    context.CancelFunc
	wg      sync.WaitGroup

	kick chan struct{} // trip wakes a worker that waits for a parked commit

	// The worker's own: one worker runs at a time, handed over under mu.
	backoff     time.Duration
	recoveredAt time.Time
	forgetLater []driver.Claim // replayed while the breaker was open (forget)
	batch       int            // claims per replayed Commit (replay)
	// The conflict log's GCRA bucket (conflict): its TAT in µs of now, the
	// conflicts not logged since the last line, and whether the line
	// saying they are not was logged (once a Store).
	logTAT      int64
	notLogged   uint64
	quietLogged bool

	outages, queuedN, replayed, conflicts, expired, dropped, claimsDropped atomic.Uint64

	chargeBufs sync.Pool // *[]driver.Charge: a local Hit's charges at this node's share
}

// New returns the degraded mode of cfg around shared, which it owns: its
// Close closes shared. The breaker starts closed.
func New(shared Shared, cfg Config) (*Conn, error) {
	clock := cfg.Clock
	if clock == nil {
		clock = memstore.Monotonic
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	mem := memstore.New(clock)
	local, err := mem.Open(driver.Config{URL: &url.URL{Scheme: "memory", Host: localName},
		KeyPrefix: localPrefix, Timeout: cfg.Timeout, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	fb := &Conn{shared: shared, cfg: cfg, log: cfg.Logger, budget: cfg.Budget,
		classify: cfg.Classify, now: now, share: cfg.Share, mem: mem, local: local,
		box: outbox{size: cfg.OutboxSize}, batch: replayBatch, clock: clock,
		recent:     newRecent(cfg.RecentCommits, clock),
		kick:       make(chan struct{}, 1),
		checkEvery: uint64(min(max(cfg.LocalClaims/16, 1), 256))}
	fb.stopCtx, fb.stop = context.WithCancel(context.Background())
	fb.chargeBufs.New = func() any { b := make([]driver.Charge, 0, 8); return &b }
	if cfg.OutboxDir != "" {
		if err := fb.restore(cfg.OutboxDir); err != nil {
			_ = local.Close()
			return nil, err
		}
	}
	return fb, nil
}

// restore opens the outbox's log in dir and queues the commits it holds,
// oldest first, each with the time its Commit queued it (by the wall
// clock: its TTL keeps running across the restart) and committed locally,
// so that a retry at this node is a Duplicate. With any, the breaker
// starts open: the Store decides shared only once they are replayed.
// Past OutboxSize the oldest are dropped (Stats.Dropped) and acknowledged.
func (fb *Conn) restore(dir string) error {
	disk, recs, err := outboxlog.Open(dir, outboxlog.Options{Logger: fb.log})
	if err != nil {
		return fmt.Errorf("outbox dir: %w", err)
	}
	if extra := len(recs) - fb.box.size; extra > 0 {
		seqs := make([]uint64, extra)
		for i := range seqs {
			seqs[i] = recs[i].Seq
		}
		if err := disk.Ack(seqs...); err != nil {
			_ = disk.Close()
			return fmt.Errorf("outbox dir: %w", err)
		}
		recs = recs[extra:]
		fb.dropped.Add(uint64(extra))
	}
	fb.disk = disk
	if len(recs) == 0 {
		return nil
	}
	now := time.Now()
	claims := make([]driver.Claim, 0, len(recs))
	for _, r := range recs {
		fb.box.push(queued{claim: r.Claim, at: r.QueuedAt, seq: r.Seq})
		c := r.Claim
		if c.TTL -= now.Sub(r.QueuedAt); c.TTL >= minTTL { // else Expired at the replay
			claims = append(claims, c)
		}
	}
	_, _ = fb.local.Commit(context.Background(), claims)
	fb.queuedN.Add(uint64(len(recs)))
	cause := fmt.Errorf("%d commits queued in %s before this Open await replay", len(recs), dir)
	if n := fb.dropped.Load(); n > 0 {
		cause = fmt.Errorf("%w (%d more, past the outbox's size, dropped)", cause, n)
	}
	fb.open(cause, "fleetstore: outbox holds commits from before this Open; "+
		"deciding from this node until they are replayed")
	return nil
}

// errDegraded is the error of a call the breaker kept from the shared
// store (a Reset, a commit the outbox could not take).
func (fb *Conn) errDegraded(op string) error {
	_, _, e := fb.classify(context.Background(), op,
		fmt.Errorf("%w: degraded: the shared store is out, not tried", driver.ErrUnavailable))
	return e
}

// localFailed is the error of a call the local store failed (the memory
// driver never fails; it says so if it did).
func (fb *Conn) localFailed(op string, err error) error {
	_, _, e := fb.classify(context.Background(), op,
		driver.ErrorReply(fmt.Errorf("local store: %w", err)))
	return e
}

// failed is the error of a call to the shared store, wrapped for op; an
// outage opens the breaker.
func (fb *Conn) failed(ctx context.Context, op string, err error) (degrade bool, e error) {
	_, degrade, e = fb.classify(ctx, op, err)
	if degrade {
		fb.trip(e)
	}
	return degrade, e
}

// Hit is Store.Hit with the fallback, after validation: shared while the
// breaker is closed, local once it is open or when this call fails for an
// outage (CONTRACT §8). The Store has checked ctx; the shared call gets
// the budget.
func (fb *Conn) Hit(ctx context.Context, charges []driver.Charge,
	claim *driver.Claim) (driver.Result, error) {
	if fb.degraded.Load() {
		return fb.localHit(charges, claim)
	}
	if res, ok, err := fb.heldLocally(charges, claim); ok {
		return res, err
	}
	ctx, cancel, err := fb.budget(ctx, "hit")
	if err != nil {
		return driver.Result{}, err
	}
	defer cancel()
	res, err := fb.shared.Hit(ctx, charges, claim)
	if err == nil {
		return res, nil
	}
	if degrade, e := fb.failed(ctx, "hit", err); !degrade {
		return driver.Result{}, e
	}
	return fb.localHit(charges, claim)
}

// localHit decides a Hit from the local store at this node's share of
// every limit.
func (fb *Conn) localHit(charges []driver.Charge, claim *driver.Claim) (driver.Result, error) {
	n := fb.localDecisions.Add(1)
	// A claim this node committed before the outage is seeded into the
	// local store, which then decides it; it adds no claim of its own.
	seeded := claim != nil && fb.seedCommitted(claim)
	if claim != nil && !seeded && fb.claimsAtCap(n) {
		claim = nil
		fb.claimsDropped.Add(1)
	}
	if len(charges) == 0 && claim == nil {
		return driver.Result{Outcome: driver.OK, Local: true}, nil
	}
	bufp, local := fb.atShare(charges)
	res, err := checked.HitShadowed(context.Background(), fb.local, local, claim)
	if err == nil {
		err = localQuota(&res, charges, local)
	}
	fb.putShare(bufp, local)
	if err != nil { // the memory driver never fails; say so if it did
		return driver.Result{}, fb.localFailed("hit", err)
	}
	if claim != nil && res.Outcome == driver.OK {
		until := fb.clock() + claim.PendingTTL.Microseconds()
		for cur := fb.pendingUntil.Load(); until > cur; cur = fb.pendingUntil.Load() {
			if fb.pendingUntil.CompareAndSwap(cur, until) {
				break
			}
		}
	}
	res.Local = true
	return res, nil
}

// atShare returns charges at this node's share (CONTRACT §8) in a
// pooled buffer, bufp, to give back with putShare.
func (fb *Conn) atShare(charges []driver.Charge) (bufp *[]driver.Charge, local []driver.Charge) {
	bufp = fb.chargeBufs.Get().(*[]driver.Charge)
	local = (*bufp)[:0]
	for _, c := range charges {
		local = append(local, fb.share.Charge(c))
	}
	return bufp, local
}

// putShare gives atShare's buffer back, cleared (the charges' tenants
// are the caller's strings).
func (fb *Conn) putShare(bufp *[]driver.Charge, local []driver.Charge) {
	clear(local)
	*bufp = local[:0]
	fb.chargeBufs.Put(bufp)
}

// heldLocally answers a Hit decided shared after an outage when this node
// holds the claim pending locally for another hook: Pending, with the
// local claim's remaining time, nothing charged, and the local buckets of
// charges as they stand (G10, as localHit reports them). ok is false when
// the shared store is to decide (no local claim can be pending any more,
// or none is for this key and another hook).
func (fb *Conn) heldLocally(charges []driver.Charge, claim *driver.Claim) (res driver.Result,
	ok bool, err error) {
	if claim == nil || fb.pendingUntil.Load() == 0 || fb.pendingUntil.Load() <= fb.clock() {
		return driver.Result{}, false, nil
	}
	holder, left, pending := fb.mem.Peek(localName, localPrefix, *claim)
	if !pending || holder == claim.HookID {
		return driver.Result{}, false, nil
	}
	res = driver.Result{Outcome: driver.Pending, RetryAfter: gcra.RetryAfter(left), Local: true}
	bufp, local := fb.atShare(charges)
	fb.mem.Quota(localName, localPrefix, local, &res)
	err = localQuota(&res, charges, local)
	fb.putShare(bufp, local)
	if err != nil {
		return driver.Result{}, true, fb.localFailed("hit", err)
	}
	return res, true, nil
}

// claimsAtCap reports whether the local store holds LocalClaims claims,
// counting them every checkEvery local decisions (n is this one's number):
// the cap may be passed by that many.
func (fb *Conn) claimsAtCap(n uint64) bool {
	if n%fb.checkEvery == 0 {
		fb.countClaims()
	}
	return fb.claimsFull.Load()
}

func (fb *Conn) countClaims() {
	_, n := fb.mem.Size(localName, localPrefix)
	fb.claimsFull.Store(n >= fb.cfg.LocalClaims)
}

// Commit is Store.Commit with the fallback, after validation (CONTRACT
// §8): a commit that cannot reach the shared store is queued and
// committed locally, its result Local.
func (fb *Conn) Commit(ctx context.Context, claims []driver.Claim) ([]error, error) {
	return fb.settle(ctx, "commit", claims, fb.sharedCommit)
}

// sharedCommit is the shared store's Commit; what it commits enters the
// index of this node's recent commits.
func (fb *Conn) sharedCommit(ctx context.Context, claims []driver.Claim) ([]error, error) {
	errs, err := fb.shared.Commit(ctx, claims)
	if err == nil && len(errs) == len(claims) {
		fb.recent.add(claims, errs)
	}
	return errs, err
}

// Release is Store.Release with the fallback, after validation: a release
// that cannot reach the shared store is made locally, its result Local.
func (fb *Conn) Release(ctx context.Context, claims []driver.Claim) ([]error, error) {
	return fb.settle(ctx, "release", claims, fb.shared.Release)
}

// settle is Commit or Release: one result per claim, a claim settled in
// the local store marked Local.
func (fb *Conn) settle(ctx context.Context, op string, claims []driver.Claim,
	call func(context.Context, []driver.Claim) ([]error, error)) ([]error, error) {
	if fb.degraded.Load() {
		return fb.localSettle(op, claims, nil, fb.errDegraded(op), make([]error, len(claims))), nil
	}
	ctx, cancel, err := fb.budget(ctx, op)
	if err != nil {
		return nil, err
	}
	defer cancel()
	errs, err := call(ctx, claims)
	if err != nil {
		degrade, e := fb.failed(ctx, op, err)
		if !degrade {
			return nil, e
		}
		return fb.localSettle(op, claims, nil, e, make([]error, len(claims))), nil
	}
	var out []int // claims that failed for an outage, each on its own
	var cause error
	for i, err := range errs {
		if err == nil {
			continue
		}
		_, degrade, e := fb.classify(ctx, op, err)
		if degrade {
			out = append(out, i)
			cause = e
			continue
		}
		errs[i] = e
	}
	if len(out) > 0 {
		fb.trip(cause)
		fb.localSettle(op, claims, out, cause, errs)
	}
	if fb.pendingUntil.Load() > fb.clock() {
		// Settled in the shared store: a claim this node took locally
		// during the outage no longer answers for them (heldLocally).
		done := make([]driver.Claim, 0, len(claims))
		for i := range claims {
			if !slices.Contains(out, i) {
				done = append(done, claims[i])
			}
		}
		fb.mem.Forget(localName, localPrefix, done...)
	}
	return errs, nil
}

// localSettle settles claims[idx] (every claim for a nil idx) in the local
// store, setting each one's result in errs (Local) and returning errs. A
// commit is queued in the outbox and committed locally, so that a retry
// at this node is a Duplicate; one the outbox cannot take is not committed
// and fails with cause. A release is made locally only: a pending claim in
// the shared store expires by its PendingTTL.
func (fb *Conn) localSettle(op string, claims []driver.Claim, idx []int, cause error,
	errs []error) []error {
	n := len(claims)
	if idx != nil {
		n = len(idx)
	}
	sub := make([]driver.Claim, 0, n)
	at := make([]int, 0, n)
	for k := range n {
		i := k
		if idx != nil {
			i = idx[k]
		}
		sub, at = append(sub, claims[i]), append(at, i)
	}
	bg := context.Background()
	if op == "release" {
		results, _ := fb.local.Release(bg, sub)
		for j := range at {
			errs[at[j]] = settledLocally
			if j < len(results) && results[j] != nil {
				_, _, e := fb.classify(bg, op, results[j])
				errs[at[j]] = &Local{Err: e}
			}
		}
		return errs
	}
	now := time.Now()
	kept := make([]driver.Claim, 0, len(sub))
	keptAt := make([]int, 0, len(sub))
	fb.mu.Lock()
	for j := range sub {
		if fb.box.reserve() {
			kept, keptAt = append(kept, sub[j]), append(keptAt, at[j])
			continue
		}
		fb.dropped.Add(1)
		if !fb.fullLogged.Load() && fb.fullLogged.CompareAndSwap(false, true) {
			fb.log.Warn("fleetstore: outbox full; commits are not queued until it drains",
				zap.String("scheme", fb.cfg.Scheme), zap.Int("outbox_size", fb.box.size))
		}
		errs[at[j]] = &Local{Err: fmt.Errorf("%w; outbox full (%d commits), not queued", cause,
			fb.box.size)}
	}
	var seqs []uint64
	if fb.disk != nil && len(kept) > 0 {
		// On disk before it counts as queued; the fsync never under mu.
		fb.mu.Unlock()
		var err error
		if seqs, err = fb.append(kept, now); err != nil {
			fb.mu.Lock()
			fb.box.unreserve(len(kept))
			fb.mu.Unlock()
			fb.dropped.Add(uint64(len(kept)))
			fb.diskFailed(err)
			for _, i := range keptAt {
				errs[i] = &Local{Err: fmt.Errorf("%w; outbox dir %s: %w, not queued", cause,
					fb.cfg.OutboxDir, err)}
			}
			return errs
		}
		fb.mu.Lock()
	}
	for j := range kept {
		q := queued{claim: kept[j], at: now}
		if seqs != nil {
			q.seq = seqs[j]
		}
		fb.box.pushReserved(q)
		errs[keptAt[j]] = settledLocally
	}
	// Committed locally under mu: the replayer cannot take (and forget) a
	// commit before it is committed here.
	if len(kept) > 0 {
		_, _ = fb.local.Commit(bg, kept) // a claim another hook holds here is decided on replay
	}
	fb.mu.Unlock()
	fb.queuedN.Add(uint64(len(kept)))
	if len(kept) > 0 {
		// The worker may have closed the breaker and ended between this
		// call's look at it and the push: a queued commit always has a
		// worker to replay it.
		fb.ensureWorker()
	}
	return errs
}

// append writes claims, queued at at, to the outbox's log and returns
// their records' seqs once they are on disk.
func (fb *Conn) append(claims []driver.Claim, at time.Time) ([]uint64, error) {
	recs := make([]outboxlog.Record, len(claims))
	for i := range claims {
		recs[i] = outboxlog.Record{Claim: claims[i], QueuedAt: at}
	}
	if err := fb.disk.Append(recs); err != nil {
		return nil, err
	}
	seqs := make([]uint64, len(recs))
	for i := range recs {
		seqs[i] = recs[i].Seq
	}
	return seqs, nil
}

// ack marks settled commits' records in the outbox's log (outside mu). A
// failure leaves them to be replayed again at the next Open, where the
// shared store finds them committed by their own hook: no conflict.
func (fb *Conn) ack(seqs []uint64) {
	if fb.disk == nil || len(seqs) == 0 {
		return
	}
	if err := fb.disk.Ack(seqs...); err != nil {
		fb.diskFailed(err)
	}
}

// diskFailed logs the outbox log's first failure: the log takes nothing
// after one (outboxlog.Log.Append), so every later commit that needs it
// fails with it, and the line is not repeated.
func (fb *Conn) diskFailed(err error) {
	if !fb.diskLogged.Load() && fb.diskLogged.CompareAndSwap(false, true) {
		fb.log.Error("fleetstore: outbox directory failed; commits are not queued "+
			"until the Store is opened again (their Commits fail with this error)",
			zap.String("scheme", fb.cfg.Scheme), zap.String("dir", fb.cfg.OutboxDir),
			zap.Error(err))
	}
}

// Reset is Store.Reset with the fallback: the local buckets always, the
// shared ones unless the breaker is open (then ErrUnavailable at once).
func (fb *Conn) Reset(ctx context.Context, tenant string) error {
	_ = fb.local.Reset(context.Background(), tenant)
	if fb.degraded.Load() {
		return fb.errDegraded("reset")
	}
	return fb.sharedCall(ctx, "reset", func(ctx context.Context) error {
		return fb.shared.Reset(ctx, tenant)
	})
}

// Ping asks the shared store whatever the breaker says; one that fails for
// an outage opens the breaker.
func (fb *Conn) Ping(ctx context.Context) error {
	return fb.sharedCall(ctx, "ping", fb.shared.Ping)
}

// sharedCall runs f, a call to the shared store, within the budget; an
// outage opens the breaker.
func (fb *Conn) sharedCall(ctx context.Context, op string, f func(context.Context) error) error {
	ctx, cancel, err := fb.budget(ctx, op)
	if err != nil {
		return err
	}
	defer cancel()
	if err := f(ctx); err != nil {
		_, e := fb.failed(ctx, op, err)
		return e
	}
	return nil
}

// Close stops the worker, makes one last replay of the outbox within one
// budget, closes the local store and then the shared store's Conn.
func (fb *Conn) Close() error {
	fb.close()
	return fb.shared.Close()
}

// Stats returns a snapshot of the degraded mode's state and counters
// (CONTRACT §8). Safe to call at any time, also after Close.
func (fb *Conn) Stats() observe.Stats { return fb.stats() }

// LocalClaims is how many claims the local store holds, swept or not.
func (fb *Conn) LocalClaims() int {
	_, n := fb.mem.Size(localName, localPrefix)
	return n
}

// trip opens the breaker: the first outage error of an outage logs it and
// starts the worker, which probes the shared store.
func (fb *Conn) trip(cause error) {
	if fb.degraded.Load() {
		return
	}
	fb.open(cause, "fleetstore: shared store out; deciding from this node until it is back")
}

// open is trip, logging msg.
func (fb *Conn) open(cause error, msg string) {
	fb.stateMu.Lock()
	if fb.degraded.Load() {
		fb.stateMu.Unlock()
		return
	}
	fb.cause, fb.since = cause, time.Now()
	fb.outages.Add(1)
	fb.atTrip = fb.stats()
	fb.fullLogged.Store(false)
	fb.refusedLogged.Store(false)
	fb.log.Warn(msg,
		zap.String("scheme", fb.cfg.Scheme), zap.String("url", fb.cfg.URL), zap.Error(cause),
		zap.Int("nodes", fb.cfg.Nodes),
		zap.Float64("share", fb.share.Fraction()))
	fb.degraded.Store(true)
	fb.stateMu.Unlock()
	fb.ensureWorker()
	select {
	case fb.kick <- struct{}{}:
	default:
	}
}

// recover closes the breaker after a probe reached the shared store and
// the outbox was replayed: one log line with the outage's figures.
func (fb *Conn) recover() {
	fb.stateMu.Lock()
	defer fb.stateMu.Unlock()
	now, st, was := time.Now(), fb.stats(), fb.atTrip
	fb.log.Info("fleetstore: shared store back; deciding shared again",
		zap.String("scheme", fb.cfg.Scheme), zap.String("url", fb.cfg.URL),
		zap.Duration("degraded_for", now.Sub(fb.since)),
		zap.Uint64("local_decisions", st.LocalDecisions-was.LocalDecisions),
		zap.Uint64("queued", st.Queued-was.Queued),
		zap.Uint64("replayed", st.Replayed-was.Replayed),
		zap.Uint64("conflicts", st.Conflicts-was.Conflicts),
		zap.Uint64("expired", st.Expired-was.Expired),
		zap.Uint64("dropped", st.Dropped-was.Dropped),
		zap.Uint64("claims_dropped", st.ClaimsDropped-was.ClaimsDropped),
		zap.Int("outbox", st.Outbox))
	fb.recoveredAt = now
	fb.degraded.Store(false)
}

// stats is Store.Stats.
func (fb *Conn) stats() observe.Stats {
	fb.mu.Lock()
	n := fb.box.len()
	fb.mu.Unlock()
	return observe.Stats{
		Degraded:       fb.degraded.Load(),
		Outages:        fb.outages.Load(),
		LocalDecisions: fb.localDecisions.Load(),
		Outbox:         n,
		Queued:         fb.queuedN.Load(),
		Replayed:       fb.replayed.Load(),
		Conflicts:      fb.conflicts.Load(),
		Expired:        fb.expired.Load(),
		Dropped:        fb.dropped.Load(),
		ClaimsDropped:  fb.claimsDropped.Load(),
	}
}

// close stops the worker, makes one last replay of what the outbox holds
// within one budget, and closes the local store and the outbox's log.
// Commits still queued are lost with the process (their claims expire by
// PendingTTL), or kept in the outbox's directory for the next Open.
func (fb *Conn) close() {
	fb.stop()
	fb.wg.Wait()
	fb.mu.Lock()
	fb.box.dueNow()
	n := fb.box.len()
	fb.mu.Unlock()
	if n > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), fb.cfg.Timeout)
		fb.replay(ctx)
		cancel()
		fb.mu.Lock()
		n = fb.box.len()
		fb.mu.Unlock()
		switch {
		case n > 0 && fb.disk != nil:
			fb.log.Warn("fleetstore: closed with commits not replayed; "+
				"they are kept in the outbox directory for the next Open",
				zap.String("scheme", fb.cfg.Scheme), zap.Int("commits", n),
				zap.String("dir", fb.cfg.OutboxDir))
		case n > 0:
			fb.log.Warn("fleetstore: closed with commits not replayed; "+
				"their claims expire by PendingTTL",
				zap.String("scheme", fb.cfg.Scheme), zap.Int("commits", n))
		}
	}
	if fb.disk != nil {
		if err := fb.disk.Close(); err != nil {
			fb.diskFailed(err)
		}
	}
	_ = fb.local.Close()
}
