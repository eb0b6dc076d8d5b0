// Package webhooktest builds test deliveries, each signed exactly as a
// provider built into package webhook signs it. A test sends the
// *http.Request to its handler or server, and the provider's Verify
// accepts it. stripe-go's webhook.GenerateTestSignedPayload does the same
// for Stripe.
//
//	req, err := webhooktest.GitHub(webhooktest.Delivery{
//		URL:    srv.URL + "/hooks/github/acme",
//		Body:   []byte(`{"zen":"Keep it logically awesome."}`),
//		Secret: "It's a Secret to Everybody",
//	})
//	if err != nil {
//		t.Fatal(err)
//	}
//	resp, err := srv.Client().Do(req)
//
// Sign does the same by the provider's name (webhook.Provider's Name), for
// a program that reads the provider from its configuration.
//
// The signatures are the providers' own schemes, spelled as the providers
// send them (lower-case hex, padded base64); each provider's test in this
// package verifies what it signs with the provider of package webhook.
// Secrets are used as the handler is given them: a Discord delivery is
// signed with a private key whose public key the handler holds
// (DiscordPublicKey).
package webhooktest

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"time"
)

// Delivery is what a test delivery carries, before it is signed.
type Delivery struct {
	// URL is where the request goes: "http://127.0.0.1:8080/hooks/acme"
	// (httptest.Server.URL and a path). Twilio signs it, query included.
	URL string
	// Body is the request's body, sent and signed as it is (Linear's gets
	// a webhookTimestamp when it has none: see Linear).
	Body []byte
	// Secret is the secret the sender signs with, as the handler's
	// Config.Secrets returns it: GitHub's webhook secret, Stripe's whsec_…,
	// a Standard Webhooks whsec_BASE64, … For Discord it is a private key
	// (see Discord).
	Secret string
	// ID is the event id of the providers that carry it in a header —
	// GitHub's X-GitHub-Delivery, Standard Webhooks' webhook-id, Shopify's
	// Webhook-Id, Twilio's I-Twilio-Idempotency-Token, Linear-Delivery; ""
	// means a random one (a new event). Standard Webhooks signs it; the
	// others named here do not, so a test may send one signed delivery
	// under several ids (webhook's package doc, "Replay"). The other
	// providers carry their event id in the body, and ID is ignored.
	ID string
	// Time is when the delivery is signed, for the providers that sign a
	// timestamp; the zero Time means time.Now().
	Time time.Time
	// Header holds more header fields to send, set after the signature's
	// (X-GitHub-Event, X-Shopify-Topic, …); nil for none. A field of the
	// signature's own name replaces it: a forged delivery.
	Header http.Header
}

// Signer builds the signed request of one provider from d: a POST to
// d.URL, ready for an http.Client or a handler's ServeHTTP. Its errors
// name the Delivery field at fault and quote no secret: a URL empty or not
// absolute, a secret empty or not of the provider's form (Standard
// Webhooks, Discord), a body Twilio cannot sign.
type Signer func(d Delivery) (*http.Request, error)

// signers are the providers by webhook.Provider's Name.
var signers = map[string]Signer{
	"github":            GitHub,
	"stripe":            Stripe,
	"standard-webhooks": StandardWebhooks,
	"svix":              Svix,
	"shopify":           Shopify,
	"slack":             Slack,
	"twilio":            Twilio,
	"discord":           Discord,
	"paddle":            Paddle,
	"linear":            Linear,
}

// Providers returns the names Sign knows, sorted: those of the providers
// built into package webhook.
func Providers() []string {
	names := make([]string, 0, len(signers))
	for name := range signers {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// ErrUnknownProvider: Sign was given a name that is not a built-in
// provider's.
var ErrUnknownProvider = errors.New("webhooktest: unknown provider")

// Sign builds d signed as the built-in provider named provider
// (webhook.Provider's Name: "github", "stripe", "standard-webhooks",
// "svix", "shopify", "slack", "twilio", "discord", "paddle", "linear")
// signs it; "shopify" is Shopify's X-Shopify-* form. An unknown name is
// ErrUnknownProvider; other errors are those of the provider's function.
func Sign(provider string, d Delivery) (*http.Request, error) {
	s, ok := signers[provider]
	if !ok {
		return nil, fmt.Errorf("%w: %q (known: %v)", ErrUnknownProvider, provider, Providers())
	}
	return s(d)
}

// GitHub signs d as GitHub does (docs.github.com, "Validating webhook
// deliveries"): X-Hub-Signature-256 is "sha256=" and the lower-case hex
// HMAC-SHA256 of the body under the secret; X-GitHub-Delivery is d.ID.
func GitHub(d Delivery) (*http.Request, error) {
	if err := needSecret(d); err != nil {
		return nil, err
	}
	return d.request(
		"X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac(d.Secret, d.Body)),
		"X-GitHub-Delivery", d.uuid())
}

// Stripe signs d as Stripe does (docs.stripe.com, "Verify webhook
// signatures manually"; stripe-go's GenerateTestSignedPayload):
// Stripe-Signature is "t=TIMESTAMP,v1=HEX", HEX the lower-case hex
// HMAC-SHA256 of "TIMESTAMP.BODY" under the endpoint secret, used as it
// is, TIMESTAMP d.Time in Unix seconds. The event id is the body's "id".
func Stripe(d Delivery) (*http.Request, error) {
	if err := needSecret(d); err != nil {
		return nil, err
	}
	ts := d.unix()
	sig := mac(d.Secret, []byte(ts+"."), d.Body)
	return d.request("Stripe-Signature", "t="+ts+",v1="+hex.EncodeToString(sig))
}

// request is a POST of d's body to d's URL with the header fields kv
// (name, value, …), then d.Header's; its Content-Type is application/json
// for a JSON body, else application/x-www-form-urlencoded (a form: Slack's
// commands, Twilio's parameters).
func (d Delivery) request(kv ...string) (*http.Request, error) {
	r, err := http.NewRequest(http.MethodPost, d.URL, bytes.NewReader(d.Body))
	if err != nil {
		return nil, fmt.Errorf("webhooktest: Delivery.URL: %w", err)
	}
	ct := "application/x-www-form-urlencoded"
	if json.Valid(d.Body) {
		ct = "application/json"
	}
	r.Header.Set("Content-Type", ct)
	for i := 0; i+1 < len(kv); i += 2 {
		r.Header.Set(kv[i], kv[i+1])
	}
	for name, values := range d.Header {
		r.Header[http.CanonicalHeaderKey(name)] = append([]string(nil), values...)
	}
	return r, nil
}

// needSecret refuses a URL that is not absolute, and an empty secret: the
// handler refuses that too (webhook.ErrSecret), and a test signed with one
// proves nothing.
func needSecret(d Delivery) error {
	if d.URL == "" {
		return errors.New("webhooktest: Delivery.URL is empty")
	}
	if u, err := url.Parse(d.URL); err != nil || u.Scheme == "" || u.Host == "" {
		return fmt.Errorf("webhooktest: Delivery.URL %q is not an absolute URL", d.URL)
	}
	if d.Secret == "" {
		return errors.New("webhooktest: Delivery.Secret is empty")
	}
	return nil
}

// id is d.ID, else prefix and 16 random bytes in hex.
func (d Delivery) id(prefix string) string {
	if d.ID != "" {
		return d.ID
	}
	return prefix + hex.EncodeToString(random())
}

// uuid is d.ID, else a random UUID (version 4), as GitHub, Shopify,
// Twilio and Linear spell their delivery ids.
func (d Delivery) uuid() string {
	if d.ID != "" {
		return d.ID
	}
	b := random()
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// random is 16 random bytes.
func random() []byte {
	b := make([]byte, 16)
	rand.Read(b) // never fails (crypto/rand)
	return b
}

// at is d.Time, else now.
func (d Delivery) at() time.Time {
	if d.Time.IsZero() {
		return time.Now()
	}
	return d.Time
}

// unix is d.at() in Unix seconds, in decimal.
func (d Delivery) unix() string { return strconv.FormatInt(d.at().Unix(), 10) }

// mac is the HMAC-SHA256 of parts, concatenated, under secret.
func mac(secret string, parts ...[]byte) []byte {
	return macKey([]byte(secret), parts...)
}

func macKey(key []byte, parts ...[]byte) []byte {
	m := hmac.New(sha256.New, key)
	for _, p := range parts {
		m.Write(p)
	}
	return m.Sum(nil)
}
