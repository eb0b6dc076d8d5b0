package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"net/http"
	"time"
)

// Provider is one webhook sender's conventions: how its deliveries are
// signed, where their event id is, and whether it redelivers a failed
// delivery on its own. The built-in ones are GitHub, Stripe,
// StandardWebhooks (and Svix), Shopify, Slack, Twilio, Discord, Paddle and
// Linear; implement it for another.
//
// Its methods are called concurrently. Their errors are answered to the
// sender and may be logged: they never quote a secret, a signature or the
// body.
type Provider interface {
	// Name is the provider's name, the claims' SourceID: "github",
	// "stripe", … (1–1024 bytes).
	Name() string
	// Retries reports whether the provider redelivers, on its own, a
	// delivery that was not answered 2xx. The handler answers a new
	// RateLimited delivery of one that does 429 Too Many Requests (and a
	// body over the byte burst 413), and accepts that of one that does
	// not, deferred (the package doc's "Statuses").
	Retries() bool
	// Verify checks that body, with the request's header h, was signed
	// by the sender with one of secrets (the tenant's, oldest last when
	// rotating), at now: the handler calls it before any charge or claim.
	// Its errors: ErrSignature, the delivery is not the sender's (401
	// Unauthorized); ErrSecret, a secret cannot be used — an empty one
	// (the empty key is a valid HMAC key: anyone can sign with it), one of
	// the wrong form — which is the handler's configuration (500, logged
	// once). Any other error is answered as ErrSignature, 401. The
	// handler refuses an empty secret (ErrSecret) before it calls Verify.
	Verify(h http.Header, body []byte, secrets []string, now time.Time) error
	// EventID returns the provider's id of the event a verified delivery
	// carries, which a redelivery of the event repeats: the dedupe key.
	// An error (it matches ErrNoEventID) is answered 400 Bad Request.
	EventID(h http.Header, body []byte) (string, error)
}

// Errors of the providers: every verification failure matches
// ErrSignature, and a missing event id ErrNoEventID.
var (
	// ErrSignature: the delivery's signature is missing, malformed, stale
	// or matches none of the secrets (401).
	ErrSignature = errors.New("webhook: signature verification failed")
	// ErrNoEventID: a verified delivery has no event id (400).
	ErrNoEventID = errors.New("webhook: no event id")
)

// sigError is a verification failure: why, never what was sent.
type sigError struct{ why string }

func (e *sigError) Error() string {
	return "webhook: signature verification failed: " + e.why
}

func (e *sigError) Is(target error) bool { return target == ErrSignature }

func sigErr(provider, why string) error { return &sigError{why: provider + ": " + why} }

// eventErr is a missing or malformed event id.
type eventErr struct{ why string }

func (e *eventErr) Error() string        { return "webhook: no event id: " + e.why }
func (e *eventErr) Is(target error) bool { return target == ErrNoEventID }

func noEventID(provider, why string) error { return &eventErr{why: provider + ": " + why} }

// within reports whether a signed timestamp ts (Unix seconds) is no
// further than tolerance from now, either way: an older one may be a
// replay, a later one a sender's broken clock.
func within(ts int64, now time.Time, tolerance time.Duration) bool {
	d := now.Sub(time.Unix(ts, 0))
	return d <= tolerance && d >= -tolerance
}

// ErrSecret: a secret the handler was given cannot be used by the provider
// — an empty one, for every provider (an HMAC under the empty key is
// anyone's signature), or a Standard Webhooks secret that is not whsec_
// and base64: the handler's configuration is wrong, and the delivery is
// answered 500, not 401, whatever its signature. The handler refuses an
// empty secret before it verifies anything; a secret the provider cannot
// decode is found once a delivery's signature headers parse (a delivery
// without them, or with unreadable ones, is refused 401 first).
var ErrSecret = errors.New("webhook: unusable secret")

type secretError struct{ provider, why string }

func (e *secretError) Error() string {
	return "webhook: unusable secret: " + e.provider + ": " + e.why
}

func (e *secretError) Is(target error) bool { return target == ErrSecret }

// checkSecrets refuses an empty secret (ErrSecret): the one place the
// rule is, for the handler (any Provider) and the built-in providers
// (through verifyHMAC).
func checkSecrets(provider string, secrets []string) error {
	for _, s := range secrets {
		if s == "" {
			why := "an empty secret (anyone can sign with the empty key)"
			return &secretError{provider: provider, why: why}
		}
	}
	return nil
}

// raw is a secret used as it is, as the HMAC key (GitHub, Stripe, Shopify).
func raw(s string) ([]byte, bool) { return []byte(s), true }

// verifyHMAC is every built-in provider's check: nil when one of sigs is
// the HMAC-SHA256, under the key of one of secrets (decode turns a secret
// into its key), of parts concatenated, compared in constant time
// (hmac.Equal); ErrSecret when a secret is empty, does not decode or
// decodes to no key — checked for every secret before any signature, so
// that the answer to a delivery whose headers parse does not depend on
// its signature; else ErrSignature naming header.
func verifyHMAC(provider, header string, secrets []string, decode func(string) ([]byte, bool),
	sigs [][]byte, parts ...[]byte) error {
	if err := checkSecrets(provider, secrets); err != nil {
		return err
	}
	keys := make([][]byte, len(secrets))
	for i, s := range secrets {
		k, ok := decode(s)
		if !ok || len(k) == 0 {
			return &secretError{provider: provider, why: "a secret is not of the provider's form"}
		}
		keys[i] = k
	}
	for _, k := range keys {
		if signedBy(k, sigs, parts...) {
			return nil
		}
	}
	return sigErr(provider, header+" matches no secret")
}

// Deferring returns p with Retries false: the handler then accepts a new
// delivery of p over the tenant's limit (or with a body over its byte
// burst), deferred, instead of answering 429 (or 413), for a provider that
// gives up on an endpoint that refuses too long.
func Deferring(p Provider) Provider { return deferring{p} }

type deferring struct{ Provider }

func (deferring) Retries() bool { return false }

// inner is p without its Deferring wrappers: the provider whose optional
// interfaces (Handshaker, RequestVerifier, Accepter, Acker) the handler
// uses.
func inner(p Provider) Provider {
	for {
		d, ok := p.(deferring)
		if !ok {
			return p
		}
		p = d.Provider
	}
}

// signedBy reports whether one of sigs is the HMAC-SHA256 under key of
// parts, concatenated: every provider's scheme, compared in constant time
// (hmac.Equal).
func signedBy(key []byte, sigs [][]byte, parts ...[]byte) bool {
	m := hmac.New(sha256.New, key)
	for _, p := range parts {
		m.Write(p)
	}
	want := m.Sum(nil)
	for _, sig := range sigs {
		if hmac.Equal(want, sig) {
			return true
		}
	}
	return false
}

// ErrUnknownTenant: Config.Secrets returns an error matching it for a
// tenant it does not know. The delivery is answered 404 Not Found, as
// Config.Tenant's errors are, and nothing is logged: a sender can name any
// tenant.
var ErrUnknownTenant = errors.New("webhook: unknown tenant")
