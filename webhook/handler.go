package webhook

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/headers"
)

// Defaults of Config.
const (
	// DefaultMaxBody is GitHub's cap on a payload, 25 MiB: the largest
	// body any built-in provider sends.
	DefaultMaxBody = 25 << 20
	// DefaultTTL keeps a committed claim 7 days: longer than Stripe's 3
	// days of retries and than a redelivery by hand is usually made.
	DefaultTTL = 7 * 24 * time.Hour
	// DefaultPendingTTL is how long a claim waits for its hook to be
	// stored: more than DefaultSinkTimeout + DefaultSettleTimeout.
	DefaultPendingTTL = 30 * time.Second
	// DefaultSinkTimeout is the Sink's budget per hook.
	DefaultSinkTimeout = 10 * time.Second
	// DefaultSettleTimeout is the budget of the Commit or Release after
	// the Sink.
	DefaultSettleTimeout = 2 * time.Second
	// DefaultRetryAfter is the Retry-After of a 503 (store or Sink out).
	DefaultRetryAfter = 5 * time.Second
)

// Config configures a Handler. Store, Provider, Secrets, Tenant and Sink
// are required; the zero value of every other field is its default.
type Config struct {
	// Store decides each delivery's charges and claim. Open it with
	// fleetstore.WithFallback to keep accepting hooks while the shared
	// store is out (the package doc's "Store outage").
	Store *fleetstore.Store
	// Provider verifies deliveries and names their events.
	Provider Provider
	// Secrets returns tenant's signing secrets for Provider: one, or
	// several while rotating (any one verifies). It is called before the
	// delivery is verified, for whatever tenant the sender names: return
	// an error matching ErrUnknownTenant for a tenant it does not know
	// (404, nothing logged). No secrets and no error (nil, nil) verify
	// nothing: 401. An empty secret is ErrSecret (500): the empty key is
	// anyone's. Any other error is answered 500 (the handler's
	// configuration or its vault, not the sender's fault) and logged once,
	// its text as it is: it must hold no secret (it may name the tenant).
	Secrets func(tenant string) ([]string, error)
	// Tenant names the tenant a delivery is for, from the request (its
	// path, a header) and its body as received, before verification: the
	// secrets verified are then that tenant's. An error is answered 404
	// Not Found, and nothing is charged or claimed.
	Tenant func(r *http.Request, body []byte) (string, error)
	// Sink makes each accepted hook durable.
	Sink Sink
	// Limits are charged by each delivery of every tenant, in order, all
	// or nothing: a byte limit (fleetstore.NewByteLimit) the body's
	// length, any other one unit. At most fleetstore.MaxCharges, one per
	// kind. None, and no Plan: deliveries are deduplicated only.
	Limits fleetstore.Plan
	// Plan, when set, returns tenant's limits instead of Limits (which
	// must then be empty): a value built once per plan, not per call
	// (fleetstore.Plan says what a plan change does to the buckets). It is
	// called once the delivery verifies; a plan Plan.Check refuses is
	// answered 500 and logged once until a plan is usable again.
	Plan func(tenant string) fleetstore.Plan
	// NearLimit, when set (0 < NearLimit < 1), is the part of a burst
	// used past which a tenant is near its limit: the delivery whose
	// charge takes a bucket's headroom below 1 − NearLimit of its
	// capacity names that kind in Delivery.NearLimit. Once per crossing,
	// fleet-wide: the bucket must refill above the mark to cross it again.
	// A degraded node's local decisions are not reported (its buckets are
	// its share of the fleet's).
	NearLimit float64
	// OnDelivery, when set, is called with every delivery's outcome once
	// its answer is written, on the request's goroutine (keep it quick):
	// an access log, per-tenant counts, near-limit warnings.
	OnDelivery func(*Delivery)
	// MaxBody is the largest body read, in bytes (0: DefaultMaxBody); a
	// larger one is answered 413 Content Too Large.
	MaxBody int64
	// TTL is how long a stored delivery's event id stays a duplicate, from
	// its commit (0: DefaultTTL; 1ms–366 days).
	TTL time.Duration
	// PendingTTL is how long a delivery's claim waits for the Sink (0:
	// DefaultPendingTTL; more than SinkTimeout + SettleTimeout, so that no
	// claim expires while its hook is being stored).
	PendingTTL time.Duration
	// SinkTimeout is the Sink's budget per hook (0: DefaultSinkTimeout).
	SinkTimeout time.Duration
	// SettleTimeout is the budget of the Commit or Release that follows
	// the Sink, on a context detached from the request (0:
	// DefaultSettleTimeout).
	SettleTimeout time.Duration
	// RetryAfter is told, in whole seconds, to a sender answered 503 (0:
	// DefaultRetryAfter).
	RetryAfter time.Duration
	// Node names this node in its claims (informational; at most 256
	// bytes; "": the host name, cut to 256 bytes).
	Node string
	// NewHookID returns a fresh hook id per delivery, 1–256 bytes (nil:
	// 128 random bits in hex). A delivery given a bad one is answered 500
	// (the handler's fault, not the sender's) and logged once.
	NewHookID func() string
	// Logger logs the handler's state changes, once each (nil: none).
	// Its lines carry the fields provider and error (the package doc's
	// "Logging").
	Logger *zap.Logger
	// Now is the handler's clock, for the providers' timestamp tolerance
	// (nil: time.Now).
	Now func() time.Time
	// LegacyHeaders adds X-RateLimit-Limit, -Remaining and -Reset to the
	// RateLimit fields of every answer (headers.Options.Legacy).
	LegacyHeaders bool
	// ClaimBody keys each delivery's claim on its body's SHA-256, not on
	// its event id: for a provider whose signature binds no event id
	// (GitHub, Shopify, Twilio, Linear), a captured delivery replayed
	// under any event id is then a Duplicate for TTL, as a redelivery is
	// (the package doc's "Replay").
	// Two distinct events with byte-identical bodies are then one event.
	ClaimBody bool
}

// Handler is an http.Handler for one webhook endpoint of one provider. It
// is safe for concurrent use.
type Handler struct {
	cfg      Config
	log      *zap.Logger
	accepted int // the status of a stored or deferred delivery (Accepter)

	verifying, secrets                    senderState // a sender can start them
	claiming, sinking, settling, planning state
}

var _ http.Handler = (*Handler)(nil)

// New returns the handler of cfg. Its errors match fleetstore.ErrInvalid
// and name the field (config.store, config.limits[1], config.pending_ttl,
// …).
func New(cfg Config) (*Handler, error) {
	invalid := func(field, why string) error {
		return fmt.Errorf("webhook: %w", &fleetstore.InvalidError{Field: "config." + field, Reason: why})
	}
	switch {
	case cfg.Store == nil:
		return nil, invalid("store", "required")
	case cfg.Provider == nil:
		return nil, invalid("provider", "required")
	case cfg.Secrets == nil:
		return nil, invalid("secrets", "required")
	case cfg.Tenant == nil:
		return nil, invalid("tenant", "required")
	case cfg.Sink == nil:
		return nil, invalid("sink", "required")
	case len(cfg.Provider.Name()) < 1 || len(cfg.Provider.Name()) > 1024:
		return nil, invalid("provider", "its name must be 1–1024 bytes")
	case cfg.Plan != nil && len(cfg.Limits) > 0:
		return nil, invalid("limits", "must be empty when Plan is set")
	case cfg.NearLimit < 0 || cfg.NearLimit >= 1 || cfg.NearLimit != cfg.NearLimit:
		return nil, invalid("near_limit", fmt.Sprintf("must be in [0, 1), got %v", cfg.NearLimit))
	case cfg.MaxBody < 0:
		return nil, invalid("max_body", "must not be negative")
	case len(cfg.Node) > maxNode:
		return nil, invalid("node",
			fmt.Sprintf("must be at most %d bytes, got %d", maxNode, len(cfg.Node)))
	}
	accepted, err := acceptStatus(cfg.Provider)
	if err != nil {
		return nil, invalid("provider", err.Error())
	}
	if err := cfg.Limits.Check(); err != nil {
		var inv *fleetstore.InvalidError
		errors.As(err, &inv)
		return nil, invalid("limits"+strings.TrimPrefix(inv.Field, "plan"), inv.Reason)
	}
	defaults := []struct {
		d   *time.Duration
		def time.Duration
	}{
		{&cfg.TTL, DefaultTTL}, {&cfg.PendingTTL, DefaultPendingTTL},
		{&cfg.SinkTimeout, DefaultSinkTimeout}, {&cfg.SettleTimeout, DefaultSettleTimeout},
		{&cfg.RetryAfter, DefaultRetryAfter},
	}
	for _, f := range defaults {
		if *f.d == 0 {
			*f.d = f.def
		}
	}
	for _, f := range []struct {
		name string
		d    time.Duration
	}{
		{"ttl", cfg.TTL}, {"pending_ttl", cfg.PendingTTL}, {"sink_timeout", cfg.SinkTimeout},
		{"settle_timeout", cfg.SettleTimeout}, {"retry_after", cfg.RetryAfter},
	} {
		if f.d < time.Millisecond || f.d > 366*24*time.Hour {
			return nil, invalid(f.name, fmt.Sprintf("must be between 1ms and 366 days, got %v", f.d))
		}
	}
	if cfg.PendingTTL <= cfg.SinkTimeout+cfg.SettleTimeout {
		return nil, invalid("pending_ttl", fmt.Sprintf("%v must be more than sink_timeout + "+
			"settle_timeout (%v): a claim would expire while its hook is stored",
			cfg.PendingTTL, cfg.SinkTimeout+cfg.SettleTimeout))
	}
	if cfg.MaxBody == 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if cfg.Node == "" {
		cfg.Node, _ = os.Hostname()
		cfg.Node = cfg.Node[:min(len(cfg.Node), maxNode)]
	}
	if cfg.NewHookID == nil {
		cfg.NewHookID = randomID
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	log := cfg.Logger
	if log == nil {
		log = zap.NewNop()
	}
	return &Handler{cfg: cfg, log: log.With(zap.String("provider", cfg.Provider.Name())),
		accepted: accepted}, nil
}

// bodyKey is the claim key of a body under Config.ClaimBody: "sha256:"
// and its digest in unpadded base64url, 50 bytes.
func bodyKey(body []byte) string {
	sum := sha256.Sum256(body)
	return "sha256:" + base64.RawURLEncoding.EncodeToString(sum[:])
}

// maxNode is the longest Node a claim takes (fleetstore.Claim.Node).
const maxNode = 256

func randomID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24)
	return hex.EncodeToString(b[:])
}

// ServeHTTP handles one delivery, in the order of the package doc: read
// the body, verify it, find its tenant and event, Hit, store, settle,
// answer; then hand its Delivery to Config.OnDelivery.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	d := &Delivery{Provider: h.cfg.Provider.Name(), Received: h.cfg.Now()}
	h.serve(w, r, d)
	d.Total = time.Since(start)
	if h.cfg.OnDelivery != nil {
		h.cfg.OnDelivery(d)
	}
}

func (h *Handler) serve(w http.ResponseWriter, r *http.Request, d *Delivery) {
	if r.Method != http.MethodPost {
		h.reply(w, d, NotPost)
		return
	}
	body, rep := h.read(w, r)
	if rep != noOutcome {
		h.reply(w, d, rep)
		return
	}
	tenant, err := h.cfg.Tenant(r, body)
	if err != nil {
		h.reply(w, d, UnknownTenant)
		return
	}
	d.Tenant = tenant
	if rep := h.verify(r, body, tenant, d.Received); rep != noOutcome {
		h.reply(w, d, rep)
		return
	}
	if reply, ct, ok := handshake(h.cfg.Provider, r.Header, body); ok {
		h.reply(w, d, Handshake, ct, string(reply))
		return
	}
	event, err := h.cfg.Provider.EventID(r.Header, body)
	if err != nil {
		h.reply(w, d, NoEvent)
		return
	}
	d.EventID = event
	plan := h.cfg.Limits
	if h.cfg.Plan != nil {
		plan = h.cfg.Plan(tenant)
		if err := plan.Check(); err != nil {
			h.planning.set(h.log, msgPlan, zap.Error(err))
			h.reply(w, d, PlanInvalid)
			return
		}
		h.planning.clear(h.log, "webhook: plans usable again")
	}
	hook := &Hook{
		ID: h.cfg.NewHookID(), Tenant: tenant, Source: h.cfg.Provider.Name(), EventID: event,
		Header: r.Header, Body: body, Received: d.Received,
	}
	d.HookID = hook.ID
	claim := fleetstore.Claim{
		Tenant: tenant, SourceID: hook.Source, Key: event, HookID: hook.ID, Node: h.cfg.Node,
		TTL: h.cfg.TTL, PendingTTL: h.cfg.PendingTTL,
	}
	if h.cfg.ClaimBody {
		claim.Key = bodyKey(body)
	}
	var buf [fleetstore.MaxCharges]fleetstore.Charge
	charges := plan.Charges(buf[:0], tenant, int64(len(body)))

	start := time.Now()
	res, err := h.cfg.Store.Hit(r.Context(), charges, &claim)
	d.Hit = time.Since(start)
	if err == nil {
		d.Local = res.Local
		h.nearLimit(d, charges, &res)
		for _, b := range res.Quota() {
			if b.Shadow && b.Denied {
				d.ShadowDenied = append(d.ShadowDenied, b.Kind)
			}
		}
	}
	denied := err == nil && res.Outcome == fleetstore.RateLimited ||
		errors.Is(err, fleetstore.ErrOverCapacity) && !h.cfg.Provider.Retries()
	if denied {
		h.refused(w, r, d, plan, res, hook, claim)
		return
	}
	if err != nil {
		h.hitFailed(w, d, err)
		return
	}
	h.answer(w, r, d, plan, res, hook, claim)
}

// nearLimit adds to d.NearLimit the kinds whose bucket res's charges took
// past the Config.NearLimit mark: the TAT's lead over now (ResetAfter) is
// over NearLimit × capacity after the charge and was not before it (the
// lead after, less the increment: the charges were taken, on a fresh OK).
// A local decision's buckets are this node's share, not the fleet's: not
// reported.
func (h *Handler) nearLimit(d *Delivery, charges []fleetstore.Charge, res *fleetstore.Result) {
	if h.cfg.NearLimit == 0 || res.Outcome != fleetstore.OK || res.Local {
		return
	}
	for i, b := range res.Quota() {
		c := &charges[i]
		mark := time.Duration(float64(c.Capacity) * h.cfg.NearLimit)
		if b.ResetAfter > mark && b.ResetAfter-c.Increment <= mark {
			d.NearLimit = append(d.NearLimit, c.Kind)
		}
	}
}

// answer answers a Hit's decision res: Duplicate 200, Pending 409, OK the
// Sink then stored (or 503), each with the fields of package headers.
func (h *Handler) answer(w http.ResponseWriter, r *http.Request, d *Delivery, plan fleetstore.Plan,
	res fleetstore.Result, hook *Hook, claim fleetstore.Claim) {
	h.claiming.clear(h.log, "webhook: deliveries are claimed again")
	headers.Write(w.Header(), &res, plan, headers.Options{Legacy: h.cfg.LegacyHeaders})
	switch res.Outcome {
	case fleetstore.Duplicate:
		h.reply(w, d, Duplicate, ack(h.cfg.Provider, hook)...)
	case fleetstore.Pending:
		h.reply(w, d, Pending)
	case fleetstore.RateLimited:
		// From refused: a new event of a provider that retries, its
		// claim released.
		h.reply(w, d, RateLimited)
	case fleetstore.OK:
		hook.Local = res.Local
		h.store(w, r, d, hook, claim)
	}
}

// refused answers a delivery its charges refused: RateLimited (limited),
// or ErrOverCapacity (a body over the byte burst) for a provider that does
// not retry. Charges are decided before the claim (CONTRACT §4), so a
// second Hit, the claim alone, charging nothing, says what the delivery
// is: a redelivery of a stored hook (Duplicate: 200, never 429), of one
// being stored (Pending: 409), or new (OK): then, for a provider that
// retries, the claim is released and the answer is 429; for one that does
// not, the hook is stored with Hook.Deferred (the package doc's
// "Statuses"). The extra round trip is only made on a denial. The
// RateLimit fields stay the charges' (none for ErrOverCapacity).
func (h *Handler) refused(w http.ResponseWriter, r *http.Request, d *Delivery,
	plan fleetstore.Plan, limited fleetstore.Result, hook *Hook, claim fleetstore.Claim) {
	start := time.Now()
	res, err := h.cfg.Store.Hit(r.Context(), nil, &claim)
	d.Hit += time.Since(start)
	if err != nil {
		h.hitFailed(w, d, err)
		return
	}
	d.Local = d.Local || res.Local
	if res.Outcome == fleetstore.OK {
		if h.cfg.Provider.Retries() {
			h.release(context.WithoutCancel(r.Context()), d, claim)
			h.answer(w, r, d, plan, limited, hook, claim)
			return
		}
		hook.Deferred = true
	}
	res.NBuckets, res.Buckets = limited.NBuckets, limited.Buckets
	h.answer(w, r, d, plan, res, hook, claim)
}

// read reads the body, at most MaxBody bytes: a larger one is 413, a
// read that fails 400, never a truncated body.
func (h *Handler) read(w http.ResponseWriter, r *http.Request) ([]byte, Outcome) {
	if r.ContentLength > h.cfg.MaxBody {
		return nil, TooLarge
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.cfg.MaxBody))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return nil, TooLarge
	case err != nil:
		return nil, Unreadable
	}
	return body, noOutcome
}

// verify checks the delivery's signature under tenant's secrets: 404 for
// a tenant Secrets does not know, 401 when the signature fails, 500 when
// the secrets cannot be had or used. The secrets state is logged when
// Secrets fails (not for an unknown tenant) or a secret is unusable, and
// cleared only by a delivery that verifies a minute or more after the last
// failure (senderState): a sender can name a tenant, not sign for it, and
// cannot turn the line on and off between real deliveries.
func (h *Handler) verify(r *http.Request, body []byte, tenant string, now time.Time) Outcome {
	secrets, err := h.cfg.Secrets(tenant)
	if errors.Is(err, ErrUnknownTenant) {
		return UnknownTenant
	}
	if err == nil {
		err = checkSecrets(h.cfg.Provider.Name(), secrets)
	}
	if err == nil {
		err = verifyDelivery(h.cfg.Provider, r, body, secrets, now)
		if err != nil && !errors.Is(err, ErrSecret) {
			// ErrSignature, or any error of a custom Provider but ErrSecret.
			h.verifying.set(h.log, now, msgUnverified, zap.Error(err))
			return Forged
		}
	}
	if err != nil { // Secrets failed, or a secret is unusable: ours to fix
		h.secrets.set(h.log, now, msgSecrets, zap.Error(err))
		return SecretsUnusable
	}
	h.secrets.clear(h.log, now, "webhook: secrets usable again")
	h.verifying.clear(h.log, now, "webhook: deliveries verify again")
	return noOutcome
}

// The log lines of conditions, each logged once until it ends.
const (
	msgUnverified = "webhook: a delivery failed signature verification" +
		" (logged once until one verifies, a minute after the last failure)"
	msgSecrets = "webhook: cannot verify deliveries: secrets unusable" +
		" (logged once until a delivery verifies, a minute after the last failure)"
	msgUnclaimable = "webhook: deliveries cannot be claimed: a bad hook id or node," +
		" the handler's configuration (logged once until one is claimed)"
	msgSink = "webhook: the sink fails; deliveries are answered 503" +
		" (logged once until it stores again)"
	msgCommit = "webhook: a commit failed after the hook was stored: answered as stored;" +
		" without a commit the claim frees after pending_ttl and a redelivery is stored" +
		" again (logged once until a settle succeeds)"
	msgRelease = "webhook: a release failed; its claim frees after pending_ttl" +
		" (logged once until a settle succeeds)"
	msgPlan = "webhook: Config.Plan returned an unusable plan; deliveries are answered 500" +
		" (logged once until a plan is usable)"
)

// hitFailed answers a Hit that returned no decision.
func (h *Handler) hitFailed(w http.ResponseWriter, d *Delivery, err error) {
	switch {
	case errors.Is(err, fleetstore.ErrOverCapacity):
		// A body over the byte limit's burst can never conform.
		h.reply(w, d, OverBurst)
	case errors.Is(err, fleetstore.ErrInvalid) && ours(err):
		h.claiming.set(h.log, msgUnclaimable, zap.Error(err))
		h.reply(w, d, Unclaimable)
	case errors.Is(err, fleetstore.ErrInvalid):
		h.reply(w, d, Invalid)
	default:
		// ErrTimeout, ErrUnavailable (no fallback), ErrClosed, the
		// request's cancellation: none is the sender's fault, and the
		// Store logs its outages.
		h.reply(w, d, StoreOut)
	}
}

// ours reports whether an ErrInvalid of a Hit is about what the handler
// put in the claim itself (NewHookID's hook id, Config.Node), not about
// what the sender sent (the tenant, the event id).
func ours(err error) bool {
	var inv *fleetstore.InvalidError
	return errors.As(err, &inv) && (inv.Field == "claim.hook_id" || inv.Field == "claim.node")
}

// store hands hook to the Sink, then commits its claim (stored) or releases
// it (503), both on contexts detached from the request with their own
// budgets: a sender that hangs up cancels neither.
//
// A commit that fails after the Sink stored the hook is still stored (the
// hook is durable) and is logged once: with a fallback an outage cannot
// fail it (the commit is queued in the outbox) but a full outbox can;
// without one, an outage or ErrClosed leaves the claim pending, to free
// after PendingTTL, and a redelivery after that is stored again;
// ErrClaimLost means another delivery took the claim after this one's
// expired: the event may be stored twice.
func (h *Handler) store(w http.ResponseWriter, r *http.Request, d *Delivery, hook *Hook,
	claim fleetstore.Claim) {
	detached := context.WithoutCancel(r.Context())
	// The Acker's answer, from the request: the Sink may keep the body.
	own := ack(h.cfg.Provider, hook)
	start := time.Now()
	err := h.sink(detached, hook)
	d.Sink = time.Since(start)
	if err != nil {
		// The Sink's error is logged as it is: it must not hold the body.
		h.sinking.set(h.log, msgSink, zap.Error(err))
		h.release(detached, d, claim)
		h.reply(w, d, SinkFailed)
		return
	}
	h.sinking.clear(h.log, "webhook: the sink stores again")
	ctx, cancel := context.WithTimeout(detached, h.cfg.SettleTimeout)
	defer cancel()
	start = time.Now()
	err = h.cfg.Store.Commit(ctx, claim)
	d.Settle = time.Since(start)
	h.settled(err, msgCommit)
	if hook.Deferred {
		h.reply(w, d, Deferred, own...)
		return
	}
	h.reply(w, d, Stored, own...)
}

// release releases claim within SettleTimeout, on detached: a failure
// leaves the claim pending until PendingTTL (the provider's retry is then
// 409 until it frees), logged once.
func (h *Handler) release(detached context.Context, d *Delivery, claim fleetstore.Claim) {
	ctx, cancel := context.WithTimeout(detached, h.cfg.SettleTimeout)
	defer cancel()
	start := time.Now()
	err := h.cfg.Store.Release(ctx, claim)
	d.Settle = time.Since(start)
	h.settled(err, msgRelease)
}

// settled starts the settling state with msg when err is not nil, and
// ends it when it is.
func (h *Handler) settled(err error, msg string) {
	if err != nil {
		h.settling.set(h.log, msg, zap.Error(err))
		return
	}
	h.settling.clear(h.log, "webhook: settles succeed again")
}

// sink runs the Sink within its budget; a panic is its failure.
func (h *Handler) sink(detached context.Context, hook *Hook) (err error) {
	ctx, cancel := context.WithTimeout(detached, h.cfg.SinkTimeout)
	defer cancel()
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("webhook: the sink panicked "+
				"(a %T; its value is not logged: it may hold the body)", p)
		}
	}()
	return h.cfg.Sink.Store(ctx, hook)
}
