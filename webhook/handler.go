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
	"strconv"
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
	// Limits are charged by each delivery, in order, all or nothing:
	// a byte limit (fleetstore.NewByteLimit) the body's length, any
	// other one unit. At most fleetstore.MaxCharges, one per kind. None:
	// deliveries are deduplicated only.
	Limits []fleetstore.Limit
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
	Logger *zap.Logger
	// Now is the handler's clock, for the providers' timestamp tolerance
	// (nil: time.Now).
	Now func() time.Time
	// LegacyHeaders adds X-RateLimit-Limit, -Remaining and -Reset to the
	// RateLimit fields of every answer (headers.Options.Legacy).
	LegacyHeaders bool
	// ClaimBody keys each delivery's claim on its body's SHA-256, not on
	// its event id: for a provider that signs the body only (GitHub,
	// Shopify), a captured delivery replayed under any event id is then a
	// Duplicate for TTL, as a redelivery is (the package doc's "Replay").
	// Two distinct events with byte-identical bodies are then one event.
	ClaimBody bool
}

// Handler is an http.Handler for one webhook endpoint of one provider. It
// is safe for concurrent use.
type Handler struct {
	cfg Config
	log *zap.Logger

	verifying, secrets          senderState // a sender can start them
	claiming, sinking, settling state
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
	case len(cfg.Limits) > fleetstore.MaxCharges:
		return nil, invalid("limits",
			fmt.Sprintf("at most %d, got %d", fleetstore.MaxCharges, len(cfg.Limits)))
	case cfg.MaxBody < 0:
		return nil, invalid("max_body", "must not be negative")
	case len(cfg.Node) > maxNode:
		return nil, invalid("node",
			fmt.Sprintf("must be at most %d bytes, got %d", maxNode, len(cfg.Node)))
	}
	for i, l := range cfg.Limits {
		if l == (fleetstore.Limit{}) {
			return nil, invalid("limits["+strconv.Itoa(i)+"]",
				"the zero Limit: build it with fleetstore.NewLimit or NewByteLimit")
		}
		for _, m := range cfg.Limits[:i] {
			if m.Kind() == l.Kind() {
				return nil, invalid("limits["+strconv.Itoa(i)+"]",
					fmt.Sprintf("kind %q charged twice", l.Kind()))
			}
		}
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
	return &Handler{cfg: cfg, log: log.With(zap.String("provider", cfg.Provider.Name()))}, nil
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
// answer.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		h.reply(w, replyNotPost)
		return
	}
	received := h.cfg.Now()
	body, rep := h.read(w, r)
	if rep != replyNone {
		h.reply(w, rep)
		return
	}
	tenant, err := h.cfg.Tenant(r, body)
	if err != nil {
		h.reply(w, replyUnknownTenant)
		return
	}
	if rep := h.verify(r.Header, body, tenant, received); rep != replyNone {
		h.reply(w, rep)
		return
	}
	event, err := h.cfg.Provider.EventID(r.Header, body)
	if err != nil {
		h.reply(w, replyNoEvent)
		return
	}
	hook := &Hook{
		ID: h.cfg.NewHookID(), Tenant: tenant, Source: h.cfg.Provider.Name(), EventID: event,
		Header: r.Header, Body: body, Received: received,
	}
	claim := fleetstore.Claim{
		Tenant: tenant, SourceID: hook.Source, Key: event, HookID: hook.ID, Node: h.cfg.Node,
		TTL: h.cfg.TTL, PendingTTL: h.cfg.PendingTTL,
	}
	if h.cfg.ClaimBody {
		claim.Key = bodyKey(body)
	}
	var buf [fleetstore.MaxCharges]fleetstore.Charge
	charges := buf[:0]
	for _, l := range h.cfg.Limits {
		cost := int64(1)
		if l.InBytes() {
			cost = int64(len(body))
		}
		charges = append(charges, l.Charge(tenant, cost))
	}

	res, err := h.cfg.Store.Hit(r.Context(), charges, &claim)
	denied := err == nil && res.Outcome == fleetstore.RateLimited ||
		errors.Is(err, fleetstore.ErrOverCapacity) && !h.cfg.Provider.Retries()
	if denied {
		h.refused(w, r, res, hook, claim)
		return
	}
	if err != nil {
		h.hitFailed(w, r, err)
		return
	}
	h.answer(w, r, res, hook, claim)
}

// answer answers a Hit's decision res: Duplicate 200, Pending 409, OK the
// Sink then 202 (or 503), each with the fields of package headers.
func (h *Handler) answer(w http.ResponseWriter, r *http.Request, res fleetstore.Result, hook *Hook,
	claim fleetstore.Claim) {
	h.claiming.clear(h.log, "webhook: deliveries are claimed again")
	headers.Write(w.Header(), &res, h.cfg.Limits, headers.Options{Legacy: h.cfg.LegacyHeaders})
	switch res.Outcome {
	case fleetstore.Duplicate:
		h.reply(w, replyDuplicate)
	case fleetstore.Pending:
		h.reply(w, replyPending)
	case fleetstore.RateLimited:
		// From refused: a new event of a provider that retries, its
		// claim released.
		h.reply(w, replyLimited)
	case fleetstore.OK:
		hook.Local = res.Local
		h.store(w, r, hook, claim)
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
func (h *Handler) refused(w http.ResponseWriter, r *http.Request, limited fleetstore.Result,
	hook *Hook, claim fleetstore.Claim) {
	res, err := h.cfg.Store.Hit(r.Context(), nil, &claim)
	if err != nil {
		h.hitFailed(w, r, err)
		return
	}
	if res.Outcome == fleetstore.OK {
		if h.cfg.Provider.Retries() {
			h.release(context.WithoutCancel(r.Context()), claim)
			h.answer(w, r, limited, hook, claim)
			return
		}
		hook.Deferred = true
	}
	res.NBuckets, res.Buckets = limited.NBuckets, limited.Buckets
	h.answer(w, r, res, hook, claim)
}

// read reads the body, at most MaxBody bytes: a larger one is 413, a
// read that fails 400, never a truncated body.
func (h *Handler) read(w http.ResponseWriter, r *http.Request) ([]byte, reply) {
	if r.ContentLength > h.cfg.MaxBody {
		return nil, replyTooLarge
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.cfg.MaxBody))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return nil, replyTooLarge
	case err != nil:
		return nil, replyUnreadable
	}
	return body, replyNone
}

// verify checks the delivery's signature under tenant's secrets: 404 for
// a tenant Secrets does not know, 401 when the signature fails, 500 when
// the secrets cannot be had or used. The secrets state is logged when
// Secrets fails (not for an unknown tenant) or a secret is unusable, and
// cleared only by a delivery that verifies a minute or more after the last
// failure (senderState): a sender can name a tenant, not sign for it, and
// cannot turn the line on and off between real deliveries.
func (h *Handler) verify(hd http.Header, body []byte, tenant string, now time.Time) reply {
	secrets, err := h.cfg.Secrets(tenant)
	if errors.Is(err, ErrUnknownTenant) {
		return replyUnknownTenant
	}
	if err == nil {
		err = checkSecrets(h.cfg.Provider.Name(), secrets)
	}
	if err == nil {
		err = h.cfg.Provider.Verify(hd, body, secrets, now)
		if err != nil && !errors.Is(err, ErrSecret) {
			// ErrSignature, or any error of a custom Provider but ErrSecret.
			h.verifying.set(h.log, now, msgUnverified, zap.Error(err))
			return replyBadSignature
		}
	}
	if err != nil { // Secrets failed, or a secret is unusable: ours to fix
		h.secrets.set(h.log, now, msgSecrets, zap.Error(err))
		return replySecrets
	}
	h.secrets.clear(h.log, now, "webhook: secrets usable again")
	h.verifying.clear(h.log, now, "webhook: deliveries verify again")
	return replyNone
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
	msgCommit = "webhook: a commit failed after the hook was stored: answered 202;" +
		" without a commit the claim frees after pending_ttl and a redelivery is stored" +
		" again (logged once until a settle succeeds)"
	msgRelease = "webhook: a release failed; its claim frees after pending_ttl" +
		" (logged once until a settle succeeds)"
)

// hitFailed answers a Hit that returned no decision.
func (h *Handler) hitFailed(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, fleetstore.ErrOverCapacity):
		// A body over the byte limit's burst can never conform.
		h.reply(w, replyOverBurst)
	case errors.Is(err, fleetstore.ErrInvalid) && ours(err):
		h.claiming.set(h.log, msgUnclaimable, zap.Error(err))
		h.reply(w, replyUnclaimable)
	case errors.Is(err, fleetstore.ErrInvalid):
		h.reply(w, replyInvalid)
	default:
		// ErrTimeout, ErrUnavailable (no fallback), ErrClosed, the
		// request's cancellation: none is the sender's fault, and the
		// Store logs its outages.
		h.reply(w, replyStoreOut)
	}
}

// ours reports whether an ErrInvalid of a Hit is about what the handler
// put in the claim itself (NewHookID's hook id, Config.Node), not about
// what the sender sent (the tenant, the event id).
func ours(err error) bool {
	var inv *fleetstore.InvalidError
	return errors.As(err, &inv) && (inv.Field == "claim.hook_id" || inv.Field == "claim.node")
}

// store hands hook to the Sink, then commits its claim (202) or releases
// it (503), both on contexts detached from the request with their own
// budgets: a sender that hangs up cancels neither.
//
// A commit that fails after the Sink stored the hook is still 202 (the
// hook is durable) and is logged once: with a fallback an outage cannot
// fail it (the commit is queued in the outbox) but a full outbox can;
// without one, an outage or ErrClosed leaves the claim pending, to free
// after PendingTTL, and a redelivery after that is stored again;
// ErrClaimLost means another delivery took the claim after this one's
// expired: the event may be stored twice.
func (h *Handler) store(w http.ResponseWriter, r *http.Request, hook *Hook,
	claim fleetstore.Claim) {
	detached := context.WithoutCancel(r.Context())
	if err := h.sink(detached, hook); err != nil {
		// The Sink's error is logged as it is: it must not hold the body.
		h.sinking.set(h.log, msgSink, zap.Error(err))
		h.release(detached, claim)
		h.reply(w, replySinkFailed)
		return
	}
	h.sinking.clear(h.log, "webhook: the sink stores again")
	ctx, cancel := context.WithTimeout(detached, h.cfg.SettleTimeout)
	defer cancel()
	h.settled(h.cfg.Store.Commit(ctx, claim), msgCommit)
	if hook.Deferred {
		h.reply(w, replyDeferred)
		return
	}
	h.reply(w, replyStored)
}

// release releases claim within SettleTimeout, on detached: a failure
// leaves the claim pending until PendingTTL (the provider's retry is then
// 409 until it frees), logged once.
func (h *Handler) release(detached context.Context, claim fleetstore.Claim) {
	ctx, cancel := context.WithTimeout(detached, h.cfg.SettleTimeout)
	defer cancel()
	h.settled(h.cfg.Store.Release(ctx, claim), msgRelease)
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
