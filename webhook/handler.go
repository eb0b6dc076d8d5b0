package webhook

import (
	"context"
	"crypto/rand"
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
	// several while rotating (any one verifies). An error is answered
	// 500 (it is the handler's configuration, not the sender's fault).
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
	// Node names this node in its claims (informational; "": the host
	// name, cut to 256 bytes).
	Node string
	// NewHookID returns a fresh hook id per delivery, 1–256 bytes (nil:
	// 128 random bits in hex).
	NewHookID func() string
	// Logger logs the handler's state changes, once each (nil: none).
	Logger *zap.Logger
	// Now is the handler's clock, for the providers' timestamp tolerance
	// (nil: time.Now).
	Now func() time.Time
	// LegacyHeaders adds X-RateLimit-Limit, -Remaining and -Reset to the
	// RateLimit fields of every answer (headers.Options.Legacy).
	LegacyHeaders bool
}

// Handler is an http.Handler for one webhook endpoint of one provider. It
// is safe for concurrent use.
type Handler struct {
	cfg Config
	log *zap.Logger

	verifying, secrets, sinking, settling state
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
		return nil, invalid("limits", fmt.Sprintf("at most %d, got %d", fleetstore.MaxCharges, len(cfg.Limits)))
	case cfg.MaxBody < 0:
		return nil, invalid("max_body", "must not be negative")
	}
	for i, l := range cfg.Limits {
		if l == (fleetstore.Limit{}) {
			return nil, invalid("limits["+strconv.Itoa(i)+"]", "the zero Limit: build it with fleetstore.NewLimit or NewByteLimit")
		}
		for _, m := range cfg.Limits[:i] {
			if m.Kind() == l.Kind() {
				return nil, invalid("limits["+strconv.Itoa(i)+"]", fmt.Sprintf("kind %q charged twice", l.Kind()))
			}
		}
	}
	defaults := []struct {
		d   *time.Duration
		def time.Duration
	}{
		{&cfg.TTL, DefaultTTL}, {&cfg.PendingTTL, DefaultPendingTTL}, {&cfg.SinkTimeout, DefaultSinkTimeout},
		{&cfg.SettleTimeout, DefaultSettleTimeout}, {&cfg.RetryAfter, DefaultRetryAfter},
	}
	for _, f := range defaults {
		if *f.d == 0 {
			*f.d = f.def
		}
	}
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"ttl", cfg.TTL}, {"pending_ttl", cfg.PendingTTL}, {"sink_timeout", cfg.SinkTimeout}, {"settle_timeout", cfg.SettleTimeout}, {"retry_after", cfg.RetryAfter}} {
		if f.d < time.Millisecond || f.d > 366*24*time.Hour {
			return nil, invalid(f.name, fmt.Sprintf("must be between 1ms and 366 days, got %v", f.d))
		}
	}
	if cfg.PendingTTL <= cfg.SinkTimeout+cfg.SettleTimeout {
		return nil, invalid("pending_ttl", fmt.Sprintf("%v must be more than sink_timeout + settle_timeout (%v): a claim would expire while its hook is stored", cfg.PendingTTL, cfg.SinkTimeout+cfg.SettleTimeout))
	}
	if cfg.MaxBody == 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if cfg.Node == "" {
		cfg.Node, _ = os.Hostname()
		cfg.Node = cfg.Node[:min(len(cfg.Node), 256)]
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
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "webhooks are POSTed", http.StatusMethodNotAllowed)
		return
	}
	received := h.cfg.Now()
	body, status, why := h.read(w, r)
	if status != 0 {
		http.Error(w, why, status)
		return
	}
	tenant, err := h.cfg.Tenant(r, body)
	if err != nil {
		http.Error(w, "unknown tenant", http.StatusNotFound)
		return
	}
	if status, why := h.verify(r.Header, body, tenant, received); status != 0 {
		http.Error(w, why, status)
		return
	}
	event, err := h.cfg.Provider.EventID(r.Header, body)
	if err != nil {
		http.Error(w, "no event id", http.StatusBadRequest)
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
	var buf [fleetstore.MaxCharges]fleetstore.Charge
	charges := buf[:0]
	for _, l := range h.cfg.Limits {
		cost := int64(1)
		if l.Bytes() {
			cost = int64(len(body))
		}
		charges = append(charges, l.Charge(tenant, cost))
	}

	res, err := h.cfg.Store.Hit(r.Context(), charges, &claim)
	if err != nil {
		h.hitFailed(w, r, err)
		return
	}
	headers.Write(w.Header(), &res, h.cfg.Limits, headers.Options{Legacy: h.cfg.LegacyHeaders})
	if res.Outcome == fleetstore.RateLimited && !h.cfg.Provider.Retries() {
		// The provider will not come back: take the claim alone, charging
		// nothing, and store the hook deferred (the package doc's
		// "Statuses").
		limited := res
		res, err = h.cfg.Store.Hit(r.Context(), nil, &claim)
		if err != nil {
			h.hitFailed(w, r, err)
			return
		}
		hook.Deferred = res.Outcome == fleetstore.OK
		res.NBuckets, res.Buckets = limited.NBuckets, limited.Buckets // the RateLimit fields stay the charge's
		w.Header().Del("Retry-After")
		headers.Write(w.Header(), &res, h.cfg.Limits, headers.Options{Legacy: h.cfg.LegacyHeaders})
	}
	switch res.Outcome {
	case fleetstore.Duplicate:
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, "duplicate: already stored\n")
	case fleetstore.Pending:
		http.Error(w, "another delivery of this event is being stored: retry", http.StatusConflict)
	case fleetstore.RateLimited:
		http.Error(w, "rate limited: retry after Retry-After", http.StatusTooManyRequests)
	case fleetstore.OK:
		hook.Local = res.Local
		h.store(w, r, hook, claim)
	}
}

// read reads the body, at most MaxBody bytes: a larger one is 413, a
// read that fails 400, never a truncated body.
func (h *Handler) read(w http.ResponseWriter, r *http.Request) ([]byte, int, string) {
	if r.ContentLength > h.cfg.MaxBody {
		return nil, http.StatusRequestEntityTooLarge, "body over " + strconv.FormatInt(h.cfg.MaxBody, 10) + " bytes"
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.cfg.MaxBody))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return nil, http.StatusRequestEntityTooLarge, "body over " + strconv.FormatInt(h.cfg.MaxBody, 10) + " bytes"
	case err != nil:
		return nil, http.StatusBadRequest, "reading the body failed"
	}
	return body, 0, ""
}

// verify checks the delivery's signature under tenant's secrets: 401
// when it fails, 500 when the secrets cannot be had or used.
func (h *Handler) verify(hd http.Header, body []byte, tenant string, now time.Time) (int, string) {
	secrets, err := h.cfg.Secrets(tenant)
	if err == nil {
		err = h.cfg.Provider.Verify(hd, body, secrets, now)
	}
	switch {
	case err == nil:
		h.secrets.clear(h.log, "webhook: secrets usable again")
		h.verifying.clear(h.log, "webhook: deliveries verify again")
		return 0, ""
	case errors.Is(err, ErrSignature):
		h.verifying.set(h.log, "webhook: a delivery failed signature verification (logged once until one verifies)", zap.Error(err))
		return http.StatusUnauthorized, "signature verification failed"
	default: // Secrets failed, or a secret is unusable: ours to fix
		h.secrets.set(h.log, "webhook: cannot verify deliveries: secrets unusable (logged once until they are)", zap.Error(err))
		return http.StatusInternalServerError, "cannot verify deliveries"
	}
}

// hitFailed answers a Hit that returned no decision.
func (h *Handler) hitFailed(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, fleetstore.ErrOverCapacity):
		// A body over the byte limit's burst can never conform.
		http.Error(w, "body over the tenant's byte burst", http.StatusRequestEntityTooLarge)
	case errors.Is(err, fleetstore.ErrInvalid):
		http.Error(w, "invalid delivery (tenant or event id)", http.StatusBadRequest)
	default:
		// ErrTimeout, ErrUnavailable (no fallback), ErrClosed, the
		// request's cancellation: none is the sender's fault, and the
		// Store logs its outages.
		h.unavailable(w, "store unavailable")
	}
}

func (h *Handler) unavailable(w http.ResponseWriter, why string) {
	w.Header().Set("Retry-After", strconv.FormatInt(headers.RetryAfterSeconds(h.cfg.RetryAfter), 10))
	http.Error(w, why+": retry", http.StatusServiceUnavailable)
}

// store hands hook to the Sink, then commits its claim (202) or releases
// it (503), both on contexts detached from the request with their own
// budgets: a sender that hangs up cancels neither.
func (h *Handler) store(w http.ResponseWriter, r *http.Request, hook *Hook, claim fleetstore.Claim) {
	detached := context.WithoutCancel(r.Context())
	err := h.sink(detached, hook)
	ctx, cancel := context.WithTimeout(detached, h.cfg.SettleTimeout)
	defer cancel()
	if err != nil {
		h.sinking.set(h.log, "webhook: the sink fails; deliveries are answered 503 (logged once until it stores again)", zap.Error(err))
		if err := h.cfg.Store.Release(ctx, claim); err != nil {
			h.settling.set(h.log, "webhook: a release failed; its claim frees after pending_ttl (logged once until a settle succeeds)", zap.Error(err))
		} else {
			h.settling.clear(h.log, "webhook: settles succeed again")
		}
		h.unavailable(w, "not stored")
		return
	}
	h.sinking.clear(h.log, "webhook: the sink stores again")
	if err := h.cfg.Store.Commit(ctx, claim); err != nil {
		// The hook is stored: answer 202 whatever the commit says. A
		// claim lost to another hook (its pending claim expired) may
		// mean the event is stored twice.
		h.settling.set(h.log, "webhook: a commit failed after the hook was stored (logged once until a settle succeeds)", zap.Error(err))
	} else {
		h.settling.clear(h.log, "webhook: settles succeed again")
	}
	w.Header().Del("Retry-After")
	w.WriteHeader(http.StatusAccepted)
	io.WriteString(w, "accepted\n")
}

// sink runs the Sink within its budget; a panic is its failure.
func (h *Handler) sink(detached context.Context, hook *Hook) (err error) {
	ctx, cancel := context.WithTimeout(detached, h.cfg.SinkTimeout)
	defer cancel()
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("webhook: the sink panicked (a %T; its value is not logged: it may hold the body)", p)
		}
	}()
	return h.cfg.Sink.Store(ctx, hook)
}
