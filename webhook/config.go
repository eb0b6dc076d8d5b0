package webhook

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/fleetstore/fleetstore"
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
	// For a calendar quota, the delivery whose charge takes the window's
	// count past NearLimit × n names it, once per window.
	// A degraded node's local decisions are not reported (its buckets are
	// its share of the fleet's).
	NearLimit float64
	// OverQuota, when set, says what happens to a delivery over a
	// calendar quota of its tenant's plan (fleetstore.NewQuota): it is
	// given the tenant and the quota's kind, for each quota of the plan,
	// once the delivery verifies. nil, or its zero value, is QuotaDefer:
	// stored, flagged, never lost (the package doc's "Quotas"). A value
	// that is no QuotaPolicy is answered 500, as a bad plan.
	OverQuota func(tenant string, quota fleetstore.Kind) QuotaPolicy
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
	// and the calendar windows of a plan's quotas (nil: time.Now).
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

// invalid is New's error for field of Config: ErrInvalid, naming it.
func invalid(field, why string) error {
	return fmt.Errorf("webhook: %w", &fleetstore.InvalidError{Field: "config." + field, Reason: why})
}

// required refuses a Config without one of the fields New needs.
func (cfg *Config) required() error {
	for _, f := range []struct {
		name string
		nil  bool
	}{
		{"store", cfg.Store == nil}, {"provider", cfg.Provider == nil},
		{"secrets", cfg.Secrets == nil}, {"tenant", cfg.Tenant == nil}, {"sink", cfg.Sink == nil},
	} {
		if f.nil {
			return invalid(f.name, "required")
		}
	}
	return nil
}

// setDefaults gives every field left at its zero value its default.
func (cfg *Config) setDefaults() {
	for _, f := range []struct {
		d   *time.Duration
		def time.Duration
	}{
		{&cfg.TTL, DefaultTTL}, {&cfg.PendingTTL, DefaultPendingTTL},
		{&cfg.SinkTimeout, DefaultSinkTimeout}, {&cfg.SettleTimeout, DefaultSettleTimeout},
		{&cfg.RetryAfter, DefaultRetryAfter},
	} {
		if *f.d == 0 {
			*f.d = f.def
		}
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
}

// check refuses a value out of its field's range, its defaults set.
func (cfg *Config) check() error {
	switch name := cfg.Provider.Name(); {
	case len(name) < 1 || len(name) > 1024:
		return invalid("provider", "its name must be 1–1024 bytes")
	case cfg.Plan != nil && len(cfg.Limits) > 0:
		return invalid("limits", "must be empty when Plan is set")
	case cfg.NearLimit < 0 || cfg.NearLimit >= 1 || cfg.NearLimit != cfg.NearLimit:
		return invalid("near_limit", fmt.Sprintf("must be in [0, 1), got %v", cfg.NearLimit))
	case cfg.MaxBody < 0:
		return invalid("max_body", "must not be negative")
	case len(cfg.Node) > maxNode:
		return invalid("node", fmt.Sprintf("must be at most %d bytes, got %d", maxNode, len(cfg.Node)))
	}
	if err := cfg.Limits.Check(); err != nil {
		var inv *fleetstore.InvalidError
		errors.As(err, &inv)
		return invalid("limits"+strings.TrimPrefix(inv.Field, "plan"), inv.Reason)
	}
	for _, f := range []struct {
		name string
		d    time.Duration
	}{
		{"ttl", cfg.TTL}, {"pending_ttl", cfg.PendingTTL}, {"sink_timeout", cfg.SinkTimeout},
		{"settle_timeout", cfg.SettleTimeout}, {"retry_after", cfg.RetryAfter},
	} {
		if f.d < time.Millisecond || f.d > 366*24*time.Hour {
			return invalid(f.name, fmt.Sprintf("must be between 1ms and 366 days, got %v", f.d))
		}
	}
	if cfg.PendingTTL <= cfg.SinkTimeout+cfg.SettleTimeout {
		return invalid("pending_ttl", fmt.Sprintf("%v must be more than sink_timeout + "+
			"settle_timeout (%v): a claim would expire while its hook is stored",
			cfg.PendingTTL, cfg.SinkTimeout+cfg.SettleTimeout))
	}
	return nil
}
