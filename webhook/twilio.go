package webhook

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"
)

// Twilio returns the provider of Twilio's webhooks
// (twilio.com/docs/usage/security, "Validating requests are coming from
// Twilio"): X-Twilio-Signature is the base64 HMAC-SHA1, under the
// account's auth token (primary or secondary while rotating), of the full
// URL Twilio called followed by every POST parameter's name and value,
// sorted by name (a repeated name's values sorted too, each once). A body
// that is not a form (JSON) is signed through the URL alone, whose
// bodySHA256 query parameter must be the body's hex SHA-256. As the
// official twilio-python validator does (twilio/request_validator.py),
// the URL is tried without a port and with one (its own, else the
// scheme's default, :443 or :80), for Twilio signs either, and the
// signature is compared as a base64 string.
//
// publicURL returns the URL Twilio called for the request r the handler
// received, query included, exactly as set in Twilio's console: behind a
// proxy or a load balancer that terminates TLS, r's own URL is not it —
// for example func(r *http.Request) string { return
// "https://hooks.example.com" + r.URL.RequestURI() }. nil means r's own:
// https when r.TLS is set, else http, r.Host and r.URL.RequestURI().
// Twilio is a RequestVerifier; its Verify, which has no URL, refuses every
// delivery.
//
// The event id is I-Twilio-Idempotency-Token, which Twilio sets on each
// webhook request and repeats on its retries; not MessageSid or CallSid,
// which every status callback of a message or a call repeats.
//
// Twilio redelivers a request answered with an error only when the URL's
// connection overrides ask it (#rc=…&rp=…); by default it retries once, a
// connection that failed: Retries is false, so a delivery over the
// tenant's limit is accepted, deferred. A stored (or deferred, or already
// stored) request is answered 200 with an empty TwiML document,
// <Response></Response> as text/xml (Accepter, Acker): Twilio reads the
// answer to an incoming message or call as TwiML — a text/plain answer is
// texted back to the sender ("TwiML Message: Your Response") or logged as
// error 12300 — and the empty document does nothing; status callbacks
// ignore it. So the handler suits webhooks whose answer
// needs no TwiML of the application's: status callbacks, and incoming
// messages answered later through the API.
//
// The signature binds neither the idempotency token nor a time: a captured
// delivery verifies again under another token (the package doc's
// "Replay").
func Twilio(publicURL func(r *http.Request) string) Provider {
	if publicURL == nil {
		publicURL = ownURL
	}
	return twilio{publicURL: publicURL}
}

// ownURL is the URL of r as the handler received it.
func ownURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + r.URL.RequestURI()
}

type twilio struct{ publicURL func(*http.Request) string }

var _ RequestVerifier = twilio{}

func (twilio) Name() string  { return "twilio" }
func (twilio) Retries() bool { return false }

// AcceptStatus implements Accepter: TwiML is answered 200.
func (twilio) AcceptStatus() int { return http.StatusOK }

// Ack implements Acker: the empty TwiML document, which tells Twilio to do
// nothing (twilio.com/docs/messaging/twiml: a <Response> with no verb).
func (twilio) Ack(http.Header, []byte) ([]byte, string) {
	return []byte(`<?xml version="1.0" encoding="UTF-8"?><Response></Response>`), "text/xml"
}

func (twilio) Verify(http.Header, []byte, []string, time.Time) error {
	return sigErr("twilio", "the signature covers the URL: only VerifyRequest can check it")
}

func (p twilio) VerifyRequest(r *http.Request, body []byte, secrets []string, _ time.Time) error {
	sig := r.Header.Get("X-Twilio-Signature")
	if sig == "" {
		return sigErr("twilio", "no X-Twilio-Signature")
	}
	if err := checkSecrets("twilio", secrets); err != nil {
		return err
	}
	urls, ok := portVariants(p.publicURL(r))
	if !ok {
		return sigErr("twilio", "the public URL is not absolute")
	}
	params, err := signedParams(urls[0], body)
	if err != nil {
		return err
	}
	for _, secret := range secrets {
		for _, u := range urls {
			m := hmac.New(sha1.New, []byte(secret))
			m.Write([]byte(u))
			m.Write([]byte(params))
			want := base64.StdEncoding.EncodeToString(m.Sum(nil))
			if hmac.Equal([]byte(want), []byte(sig)) {
				return nil
			}
		}
	}
	return sigErr("twilio", "X-Twilio-Signature matches no auth token")
}

// portVariants returns rawURL without its port and with it, the scheme's
// default (443 for https, else 80) when it has none: the two forms Twilio
// may sign. ok is false for a URL with no scheme or host.
func portVariants(rawURL string) (urls [2]string, ok bool) {
	scheme, rest, ok := strings.Cut(rawURL, "://")
	if !ok || scheme == "" {
		return urls, false
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	authority, tail := rest[:end], rest[end:]
	host, port := authority, ""
	if i := strings.LastIndexByte(authority, ':'); i > strings.LastIndexByte(authority, ']') {
		host, port = authority[:i], authority[i+1:]
	}
	if host == "" {
		return urls, false
	}
	if port == "" {
		port = "80"
		if scheme == "https" {
			port = "443"
		}
	}
	return [2]string{scheme + "://" + host + tail, scheme + "://" + host + ":" + port + tail}, true
}

// signedParams is what follows the URL in what Twilio signs: the form
// body's parameters, names sorted, each followed by its values sorted
// (each value once, as twilio-python does); nothing for a body the URL's
// bodySHA256 signs, which must then be the body's SHA-256.
func signedParams(rawURL string, body []byte) (string, error) {
	var query url.Values
	if u, err := url.Parse(rawURL); err == nil {
		query = u.Query()
	}
	if want := query.Get("bodySHA256"); want != "" {
		got := sha256.Sum256(body)
		if !hmac.Equal([]byte(hex.EncodeToString(got[:])), []byte(want)) {
			return "", sigErr("twilio", "the body does not match the URL's bodySHA256")
		}
		return "", nil
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return "", sigErr("twilio", "the body is not a form")
	}
	names := make([]string, 0, len(form))
	for name := range form {
		names = append(names, name)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, name := range names {
		values := form[name]
		sort.Strings(values)
		for i, v := range values {
			if i == 0 || v != values[i-1] {
				b.WriteString(name)
				b.WriteString(v)
			}
		}
	}
	return b.String(), nil
}

func (twilio) EventID(h http.Header, _ []byte) (string, error) {
	if id := h.Get("I-Twilio-Idempotency-Token"); id != "" {
		return id, nil
	}
	return "", noEventID("twilio", "no I-Twilio-Idempotency-Token")
}
