package webhook_test

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore/webhook"
)

// How each provider reads its signature, and where its test vector comes
// from: the notes behind the package doc's "Verification".
//
// Every built-in provider but Twilio (HMAC-SHA1) and Discord (Ed25519,
// crypto/ed25519) is HMAC-SHA256 through crypto/hmac, compared with
// hmac.Equal, and reads its headers as the provider's official verifier
// reads them, so that the two refuse the same deliveries:
//
//	GitHub    X-Hub-Signature-256: "sha256=" and the hex
//	Stripe    Stripe-Signature: split at each "," (nothing trimmed), each
//	          part at its first "=": t the timestamp, v1 a hex signature,
//	          other keys skipped
//	Standard  webhook-signature: split at each single space, each entry at
//	Webhooks  each ",": v1 and the base64 (a third field skipped)
//	Shopify   Shopify-Hmac-Sha256, base64, and the event id
//	          Shopify-Webhook-Id when the delivery has Shopify-Hmac-Sha256;
//	          else X-Shopify-Hmac-Sha256 and X-Shopify-Webhook-Id
//	Slack     X-Slack-Signature: "v0=" and the hex (python-slack-sdk)
//	Twilio    X-Twilio-Signature: the base64, of the URL without a port and
//	          with one, its own or the scheme's (twilio-python)
//	Discord   X-Signature-Ed25519: the hex, either case
//	          (discord-interactions-js)
//	Paddle    Paddle-Signature: split at each ";", each part at its first
//	          "=": ts the timestamp, every h1 a hex signature, other keys
//	          skipped (paddle-node-sdk; paddle-python-sdk tries every h1)
//	Linear    Linear-Signature: the hex; webhookTimestamp, in the body
//	          (@linear/sdk)
//
// A signature is the provider's own spelling of its 32 bytes, 64
// lower-case hex digits or 44 characters of padded standard base64: the
// official verifiers (octokit/webhooks-methods, stripe-node,
// @shopify/shopify-api, the Standard Webhooks reference libraries) compare
// those strings, where encoding/hex and base64.StdEncoding would read
// other spellings of the same bytes. A timestamp is read by
// strconv.ParseInt and signed as that integer, as stripe-go and the
// reference Go library do. A Shopify header of the other form is not
// read, as in @shopify/shopify-api (shopify-api-ruby takes each header
// from either). Differences kept, on what the providers never send: a
// timestamp further than the tolerance ahead of now is refused (stripe-node
// and stripe-go refuse only old ones), as are leading spaces and trailing
// text that JavaScript's parseInt skips (stripe-node, the reference
// JavaScript library) and upper-case hex, which stripe-go reads; and
// Shopify's topic, shop domain and API version headers, which
// @shopify/shopify-api requires, are not required (the handler uses none).
// Twilio's signature is 28 characters of base64 (20 bytes), compared as a
// string as twilio-python compares it; Discord's 128 hex digits. Kept too:
// Paddle's and Discord's timestamps are held to a tolerance both ways
// (Paddle's SDKs refuse only old ones, discord-interactions-js none), and
// a Linear body without webhookTimestamp is refused (@linear/sdk then
// reads the unsigned Linear-Timestamp header, or checks no time).
//
// Each provider is tested against a signed delivery of the provider's
// own: GitHub's docs' ("Validating webhook deliveries"), the Standard
// Webhooks reference library's (libraries/go/webhook_test.go), the
// official stripe-dotnet library's (EventUtilityTest.cs), and the official
// shopify-api-php library's (tests/Webhooks/RegistryTest.php) and
// @shopify/shopify-api's (lib/webhooks/__tests__/validate.test.ts, in
// both forms); Stripe's and Shopify's docs give their example signatures
// without the secret and body. No official library is used instead:
// stripe-go is the whole Stripe API client (its ConstructEvent also
// refuses an event of another API version, and its checks read time.Now),
// GitHub and Shopify have no official Go verifier, and the Standard
// Webhooks one reads time.Now (no tolerance but its fixed 5 minutes, no
// injected clock) and not Svix's svix-* headers — and each scheme is one
// HMAC.
//
// Slack, Twilio, Paddle and Linear are tested likewise: Slack's docs'
// delivery (as python-slack-sdk tests it), twilio-python's tests',
// paddle-go-sdk's example and paddle-node-sdk's and paddle-python-sdk's
// tests', the body and secret of the Linear SDK's test. Discord publishes
// none: its test signs with RFC 8032's published test key. No provider's
// library is used: paddle-go-sdk's and twilio-go's verifiers come with
// their whole API clients (paddle-go-sdk's reads the body and time.Now
// itself, twilio-go's takes the parameters as a map, so no repeated
// name), and Slack, Discord and Linear publish no Go verifier.
//
// A Standard Webhooks secret is read with its = padding or without it:
// the reference Python library pads it before decoding, npm's
// standardwebhooks and svix decode it unpadded, and the unpadded vectors
// below were signed by them. The reference Go library refuses it.

// A vector is one signed delivery: its headers, body and the secret that
// signed it, and when it was received.
type vector struct {
	source  string // where the vector comes from
	p       webhook.Provider
	header  http.Header
	body    string
	secret  string
	now     time.Time
	eventID string
}

func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

// The official vectors of each provider: its documentation's, else its
// official library's tests', each cited by its exact source. Only the
// headers the signature does not cover (an event id where the vector has
// none) are added here, and are said to be.
var vectors = []vector{
	{
		// GitHub's docs, "Validating webhook deliveries", "Testing the
		// webhook payload validation"
		// (https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries):
		// secret, payload and X-Hub-Signature-256 as published there. The
		// delivery GUID is the example delivery's of GitHub's docs,
		// "Webhook events and payloads", "Delivery headers".
		source: "docs.github.com validating-webhook-deliveries",
		p:      webhook.GitHub(),
		header: hdr("X-Hub-Signature-256", "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17",
			"X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958"),
		body:    "Hello, World!",
		secret:  "It's a Secret to Everybody",
		eventID: "72d3162e-cc78-11e3-81ab-4c9367dc0958",
	},
	{
		// The Standard Webhooks reference library's test,
		// github.com/standard-webhooks/standard-webhooks
		// libraries/go/webhook_test.go, TestWebhookSign: secret, msg id,
		// timestamp, payload and signature as there (Svix's docs show the
		// same one).
		source: "standard-webhooks libraries/go/webhook_test.go",
		p:      webhook.StandardWebhooks(0),
		header: hdr("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek", "webhook-timestamp", "1614265330",
			"webhook-signature", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="),
		body:    `{"test": 2432232314}`,
		secret:  "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
		now:     time.Unix(1614265330, 0).Add(time.Minute),
		eventID: "msg_p5jXN8AQM9LWM0D4loKWxJek",
	},
	{
		// The same, under Svix's own header names (svix-*), with the
		// reference library's secret without its whsec_ prefix (which the
		// library accepts too: TestWebhookPrefix there) and a signature of
		// another scheme first in the list (v1a), which is skipped.
		source: "standard-webhooks libraries/go/webhook_test.go, svix-* headers",
		p:      webhook.Svix(0),
		header: hdr("svix-id", "msg_p5jXN8AQM9LWM0D4loKWxJek", "svix-timestamp", "1614265330",
			"svix-signature", "v1a,AAAA v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="),
		body:    `{"test": 2432232314}`,
		secret:  "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
		now:     time.Unix(1614265330, 0).Add(-time.Minute),
		eventID: "msg_p5jXN8AQM9LWM0D4loKWxJek",
	},
	{
		// A secret without its base64 padding, accepted as the official
		// libraries accept it: the two unpadded secrets of the Standard
		// Webhooks reference Python library's test
		// (libraries/python/tests/test_webhooks.py,
		// test_signature_verification_with_unpadded_secret), that test's
		// msg id and payload, at TestWebhookSign's timestamp. Its
		// signatures are computed there at time.Now, so the ones here
		// were made by the libraries themselves: that library's
		// Webhook.sign (libraries/python/standardwebhooks/webhooks.py,
		// which pads the secret with "=="), and npm's standardwebhooks
		// 1.1.1 and svix 1.99.1, which gave the same.
		source: "standard-webhooks Python library, a secret one = short",
		p:      webhook.StandardWebhooks(0),
		header: hdr("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek", "webhook-timestamp", "1614265330",
			"webhook-signature", "v1,LVOXivKoo4FWasi/IaHvzhE/u+7/cu2AME+zS/nXqzk="),
		body:    `{"test": 2432232314}`,
		secret:  "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaS",
		now:     time.Unix(1614265330, 0),
		eventID: "msg_p5jXN8AQM9LWM0D4loKWxJek",
	},
	{
		// The same, two = short, under Svix's header names.
		source: "standard-webhooks Python library, a secret two = short",
		p:      webhook.Svix(0),
		header: hdr("svix-id", "msg_p5jXN8AQM9LWM0D4loKWxJek", "svix-timestamp", "1614265330",
			"svix-signature", "v1,yK2tMbA6BHPrMEJ1lLv7UlJJbgFoqGenJkiajZ29evg="),
		body:    `{"test": 2432232314}`,
		secret:  "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwBr",
		now:     time.Unix(1614265330, 0),
		eventID: "msg_p5jXN8AQM9LWM0D4loKWxJek",
	},
	{
		// Stripe's official .NET library's test,
		// github.com/stripe/stripe-dotnet
		// src/StripeTests/Services/Events/EventUtilityTest.cs: secret
		// "webhook_secret", t=1533204620 and the Stripe-Signature as there
		// (its v0 entry is not a live scheme and is not checked), over the
		// fixture src/StripeTests/Resources/event_test_signature.json
		// (stripeDotnetEvent, its final newline included); that test
		// verifies it 100 s after signing. Stripe's docs publish no
		// secret with their example header, and stripe-go's tests sign
		// at time.Now.
		source:  "stripe-dotnet EventUtilityTest.cs",
		p:       webhook.Stripe(0),
		header:  hdr("Stripe-Signature", stripeDotnetSignature),
		body:    stripeDotnetEvent,
		secret:  "webhook_secret",
		now:     time.Unix(1533204620, 0).Add(100 * time.Second),
		eventID: "evt_123",
	},
	{
		// Shopify's official PHP library's test,
		// github.com/Shopify/shopify-api-php
		// tests/Webhooks/RegistryTest.php, testProcessWebhook: the body
		// json_encode(['foo' => 'bar']) and X-Shopify-Hmac-Sha256 as
		// there, under the API secret key "steffi" of
		// tests/BaseTestCase.php. Shopify's docs publish no vector (their
		// example X-Shopify-Hmac-Sha256 comes without its secret and
		// body). That test's delivery has no ids; the two id headers are
		// the example headers' of Shopify's docs
		// (https://shopify.dev/docs/apps/build/webhooks, "Headers"), not
		// signed: the event id is X-Shopify-Webhook-Id, not
		// X-Shopify-Event-Id.
		source: "shopify-api-php tests/Webhooks/RegistryTest.php",
		p:      webhook.Shopify(),
		header: hdr("X-Shopify-Hmac-Sha256", "/Redz4YXHLnSmmSN8grr5/Jl/Ua3d7yX3iWbjb8R8wo=",
			"X-Shopify-Event-Id", "98880550-7158-44d4-b7cd-2c97c8a091b5", "X-Shopify-Webhook-Id", "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043"),
		body:    `{"foo":"bar"}`,
		secret:  "steffi",
		eventID: "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043",
	},
	{
		// The official @shopify/shopify-api's test,
		// github.com/Shopify/shopify-app-js
		// packages/apps/shopify-api/lib/webhooks/__tests__/validate.test.ts,
		// "returns true for valid request": the body '{"foo": "bar"}' and
		// the hmac it expects, under the apiSecretKey "test_secret_key" of
		// lib/__tests__/test-config.ts, with the webhookId of
		// __tests__/utils.ts's headers().
		source: "shopify-app-js validate.test.ts, X-Shopify-* headers",
		p:      webhook.Shopify(),
		header: hdr("X-Shopify-Hmac-Sha256", shopifyJSHmac, "X-Shopify-Topic", "products/create",
			"X-Shopify-Webhook-Id", "123456789"),
		body:    shopifyJSBody,
		secret:  "test_secret_key",
		eventID: "123456789",
	},
	{
		// The same test's "validates events webhooks with lowercase
		// headers": the same body and secret (so the same hmac), in the
		// lower-case shopify-* headers, with its shopify-webhook-id and
		// shopify-event-id; the event id is the webhook id.
		source: "shopify-app-js validate.test.ts, shopify-* headers",
		p:      webhook.Shopify(),
		header: hdr("shopify-hmac-sha256", shopifyJSHmac, "shopify-topic", "Product",
			"shopify-webhook-id", "123456789", "shopify-event-id", "event-abc"),
		body:    shopifyJSBody,
		secret:  "test_secret_key",
		eventID: "123456789",
	},
}

// shopifyJSBody and shopifyJSHmac are @shopify/shopify-api's test
// delivery (validate.test.ts: rawBody, and the hmac of its "returns true
// for valid request") under "test_secret_key".
const (
	shopifyJSBody = `{"foo": "bar"}`
	shopifyJSHmac = "B23tXN681gZ0qIWNRrgtzBE9XSDo5yaUu6wfmhu3a7g="
)

// stripeDotnetEvent is stripe-dotnet's fixture
// src/StripeTests/Resources/event_test_signature.json, byte for byte, and
// stripeDotnetSignature the Stripe-Signature its EventUtilityTest.cs gives
// it under the secret "webhook_secret".
const (
	stripeDotnetEvent = `{
  "id": "evt_123",
  "object": "event",
  "account": "acct_123",
  "api_version": "2017-05-25",
  "created": 1533204620,
  "data": {
    "object": {
      "id": "cus_123",
      "object": "customer",
      "created": 123456789,
      "email": "test@stripe.com",
      "livemode": false,
      "metadata": {}
    }
  },
  "livemode": false,
  "pending_webhooks": 1,
  "request": {
    "id": "req_123",
    "idempotency_key": "idempotency-key-123"
  },
  "type": "customer.created"
}
`
	stripeDotnetSignature = "t=1533204620,v1=2220f87ef101a04665f11cdf770523143f875572008577fa0f20882ddb9cc3c7,v0=63f3a72374a733066c4be69ed7f8e5ac85c22c9f0a6a612ab9a025a9e4ee7eef"
)

// flip returns body with its middle byte changed by one bit.
func flip(body string) string {
	b := []byte(body)
	b[len(b)/2] ^= 1
	return string(b)
}

func (v vector) verify(h http.Header, body string, secrets ...string) error {
	return v.p.Verify(h, []byte(body), secrets, v.now)
}

func clone(h http.Header, kv ...string) http.Header {
	c := h.Clone()
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == "" {
			c.Del(kv[i])
		} else {
			c.Set(kv[i], kv[i+1])
		}
	}
	return c
}

// TestVectors: each provider verifies the signature of its own
// documentation or official library (vectors, above), and refuses a
// tampered body and a wrong
// secret; a second secret (rotation) verifies too; the event id is read.
func TestVectors(t *testing.T) {
	t.Parallel()
	for _, v := range vectors {
		t.Run(v.p.Name()+"/"+v.source, func(t *testing.T) {
			if err := v.verify(v.header, v.body, v.secret); err != nil {
				t.Fatalf("the vector: %v", err)
			}
			if err := v.verify(v.header, v.body, "whsec_b2xkIHNlY3JldA==", v.secret); err != nil {
				t.Errorf("the secret second of two (rotation): %v", err)
			}
			for name, body := range map[string]string{
				"one bit flipped":  flip(v.body),
				"one more byte":    v.body + " ",
				"empty body":       "",
				"truncated by one": v.body[:len(v.body)-1],
			} {
				if err := v.verify(v.header, body, v.secret); !errors.Is(err, webhook.ErrSignature) {
					t.Errorf("%s: %v, want ErrSignature", name, err)
				}
			}
			wrong := "whsec_d3Jvbmcgc2VjcmV0" // base64 "wrong secret"
			if err := v.verify(v.header, v.body, wrong); !errors.Is(err, webhook.ErrSignature) {
				t.Errorf("wrong secret: %v, want ErrSignature", err)
			}
			if err := v.verify(v.header, v.body); !errors.Is(err, webhook.ErrSignature) {
				t.Errorf("no secret: %v, want ErrSignature", err)
			}
			id, err := v.p.EventID(v.header, []byte(v.body))
			if err != nil || id != v.eventID {
				t.Errorf("EventID = %q, %v; want %q", id, err, v.eventID)
			}
		})
	}
}

// TestMalformed: missing and malformed signature headers are ErrSignature
// for every provider, and no error quotes the secret or the signature.
func TestMalformed(t *testing.T) {
	t.Parallel()
	for _, v := range vectors {
		var cases map[string]http.Header
		switch v.p.Name() {
		case "github":
			cases = map[string]http.Header{
				"missing":     clone(v.header, "X-Hub-Signature-256", ""),
				"sha1 prefix": clone(v.header, "X-Hub-Signature-256", "sha1="+strings.Repeat("0", 64)),
				"short":       clone(v.header, "X-Hub-Signature-256", "sha256=abcd"),
				"not hex":     clone(v.header, "X-Hub-Signature-256", "sha256="+strings.Repeat("z", 64)),
				"upper case":  clone(v.header, "X-Hub-Signature-256", strings.ToUpper(v.header.Get("X-Hub-Signature-256"))),
			}
		case "stripe":
			cases = map[string]http.Header{
				"missing":      clone(v.header, "Stripe-Signature", ""),
				"no timestamp": clone(v.header, "Stripe-Signature", "v1=2220f87ef101a04665f11cdf770523143f875572008577fa0f20882ddb9cc3c7"),
				"no v1":        clone(v.header, "Stripe-Signature", "t=1533204620,v0=63f3a72374a733066c4be69ed7f8e5ac85c22c9f0a6a612ab9a025a9e4ee7eef"),
				"other t":      clone(v.header, "Stripe-Signature", strings.Replace(v.header.Get("Stripe-Signature"), "t=1533204620", "t=1533204621", 1)),
				"garbage":      clone(v.header, "Stripe-Signature", ",,,=,t=,v1=zz"),
			}
		case "shopify":
			name := "X-Shopify-Hmac-Sha256"
			if v.header.Get("Shopify-Hmac-Sha256") != "" {
				name = "Shopify-Hmac-Sha256"
			}
			cases = map[string]http.Header{
				"missing":    clone(v.header, name, ""),
				"not base64": clone(v.header, name, "!!!"),
				"short":      clone(v.header, name, "AAAA"),
				"hex":        clone(v.header, name, strings.Repeat("ab", 32)),
			}
		default: // Standard Webhooks, Svix
			cases = map[string]http.Header{
				"no signature":    clone(v.header, "webhook-signature", "", "svix-signature", ""),
				"no id":           clone(v.header, "webhook-id", "", "svix-id", ""),
				"no timestamp":    clone(v.header, "webhook-timestamp", "", "svix-timestamp", ""),
				"bad timestamp":   clone(v.header, "webhook-timestamp", "soon"),
				"other id":        clone(v.header, "webhook-id", "msg_other"),
				"only v1a":        clone(v.header, "webhook-signature", "v1a,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="),
				"not base64":      clone(v.header, "webhook-signature", "v1,***"),
				"no comma":        clone(v.header, "webhook-signature", "v1g0hM9SsE"),
				"other timestamp": clone(v.header, "webhook-timestamp", "1614265331"),
			}
		}
		for name, h := range cases {
			err := v.verify(h, v.body, v.secret)
			if !errors.Is(err, webhook.ErrSignature) {
				t.Errorf("%s: %s: %v, want ErrSignature", v.p.Name(), name, err)
				continue
			}
			for _, secretish := range []string{v.secret, "757107ea", "g0hM9SsE", "2220f87e", "/Redz4YX", "B23tXN68", v.body} {
				if secretish != "" && strings.Contains(err.Error(), secretish) {
					t.Errorf("%s: %s: error %q quotes a secret, a signature or the body", v.p.Name(), name, err)
				}
			}
		}
	}
}

// TestTolerance: Stripe and Standard Webhooks refuse a timestamp further
// than the tolerance from now, in the past (a replay) or the future.
func TestTolerance(t *testing.T) {
	t.Parallel()
	for _, v := range vectors {
		ts, ok := map[string]int64{"stripe": 1533204620, "standard-webhooks": 1614265330, "svix": 1614265330}[v.p.Name()]
		if !ok {
			continue
		}
		signed := time.Unix(ts, 0)
		for _, tt := range []struct {
			tolerance time.Duration
			now       time.Time
			ok        bool
		}{
			{0, signed.Add(5 * time.Minute), true},
			{0, signed.Add(5*time.Minute + time.Second), false},
			{0, signed.Add(-5 * time.Minute), true},
			{0, signed.Add(-5*time.Minute - time.Second), false},
			{0, signed.Add(24 * time.Hour), false},
			{time.Hour, signed.Add(59 * time.Minute), true},
			{time.Second, signed.Add(2 * time.Second), false},
		} {
			p := webhook.Stripe(tt.tolerance)
			if v.p.Name() != "stripe" {
				p = webhook.StandardWebhooks(tt.tolerance)
			}
			err := p.Verify(v.header, []byte(v.body), []string{v.secret}, tt.now)
			if tt.ok && err != nil || !tt.ok && !errors.Is(err, webhook.ErrSignature) {
				t.Errorf("%s: tolerance %v, received %v after signing: %v, want ok %v", v.p.Name(), tt.tolerance, tt.now.Sub(signed), err, tt.ok)
			}
		}
	}
}

// TestEventIDs: the event id's other sources and their absence.
func TestEventIDs(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		p    webhook.Provider
		h    http.Header
		body string
		want string // "": ErrNoEventID
	}{
		{webhook.GitHub(), hdr(), "", ""},
		{webhook.Shopify(), hdr("X-Shopify-Webhook-Id", "w-1"), "", "w-1"},
		{webhook.Shopify(), hdr("X-Shopify-Event-Id", "e-1"), "", ""},
		{webhook.Shopify(), hdr(), "", ""},
		{webhook.Stripe(0), hdr(), `{"object":"event"}`, ""},
		{webhook.Stripe(0), hdr(), `not json`, ""},
		{webhook.Stripe(0), hdr(), `{"id": 5}`, ""},
		{webhook.Stripe(0), hdr(), `{"id":"evt_1","data":{"id":"ch_1"}}`, "evt_1"},
		{webhook.StandardWebhooks(0), hdr(), "", ""},
	} {
		id, err := tt.p.EventID(tt.h, []byte(tt.body))
		if tt.want == "" && !errors.Is(err, webhook.ErrNoEventID) || tt.want != "" && (err != nil || id != tt.want) {
			t.Errorf("%s %v %q: %q, %v; want %q", tt.p.Name(), tt.h, tt.body, id, err, tt.want)
		}
	}
}

// TestUnusableSecret: a Standard Webhooks secret that is not whsec_ and
// base64, padded or not, is the handler's configuration error
// (ErrSecret), not the sender's (ErrSignature).
func TestUnusableSecret(t *testing.T) {
	t.Parallel()
	v := vectors[1]
	for _, secret := range []string{
		"whsec_***",
		"whsec_MfKQ9", // 5 characters: no length of base64
		"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwBr=", // one = of two
		"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw=",   // a = too many
		"whsec_Mf KQ",
	} {
		if err := v.verify(v.header, v.body, secret); !errors.Is(err, webhook.ErrSecret) || errors.Is(err, webhook.ErrSignature) {
			t.Errorf("%s: got %v, want ErrSecret", secret, err)
		}
	}
	if webhook.Deferring(webhook.Stripe(0)).Retries() || !webhook.Stripe(0).Retries() || webhook.GitHub().Retries() {
		t.Error("Retries")
	}
}

// vectorOf returns the vector of source.
func vectorOf(t *testing.T, source string) vector {
	t.Helper()
	for _, v := range vectors {
		if v.source == source {
			return v
		}
	}
	t.Fatalf("no vector %q", source)
	return vector{}
}

// nonCanonical returns s, the padded base64 of 32 bytes, with the bits
// its last character holds past the data set: base64.StdEncoding (not
// Strict) decodes it to the same bytes.
func nonCanonical(t *testing.T, s string) string {
	t.Helper()
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	i := len(s) - 2 // the last character before the one "="
	c := strings.IndexByte(alphabet, s[i])
	odd := s[:i] + string(alphabet[c^1]) + s[i+1:]
	a, errA := base64.StdEncoding.DecodeString(s)
	b, errB := base64.StdEncoding.DecodeString(odd)
	if errA != nil || errB != nil || !bytes.Equal(a, b) {
		t.Fatalf("%q and %q are not the same bytes to StdEncoding", s, odd)
	}
	return odd
}

// upperHex returns s, lower-case hex, in upper case, after checking that
// hex.DecodeString reads both as the same bytes.
func upperHex(t *testing.T, s string) string {
	t.Helper()
	a, errA := hex.DecodeString(s)
	b, errB := hex.DecodeString(strings.ToUpper(s))
	if errA != nil || errB != nil || !bytes.Equal(a, b) || strings.ToUpper(s) == s {
		t.Fatalf("%q: not lower-case hex", s)
	}
	return strings.ToUpper(s)
}

// TestOfficialParsing: each provider's signature header is parsed as the
// provider's official verifier parses it (the notes at the top of this
// file), on the provider's own vector: a spelling of the same
// signature that verifier refuses is refused here (though Go's hex and
// base64 decoders read it as the same bytes), and one it takes is taken.
func TestOfficialParsing(t *testing.T) {
	t.Parallel()
	gh := vectorOf(t, "docs.github.com validating-webhook-deliveries")
	st := vectorOf(t, "stripe-dotnet EventUtilityTest.cs")
	sw := vectorOf(t, "standard-webhooks libraries/go/webhook_test.go")
	sp := vectorOf(t, "shopify-api-php tests/Webhooks/RegistryTest.php")
	spl := vectorOf(t, "shopify-app-js validate.test.ts, shopify-* headers")
	ghSig := strings.TrimPrefix(gh.header.Get("X-Hub-Signature-256"), "sha256=")
	stSig := "2220f87ef101a04665f11cdf770523143f875572008577fa0f20882ddb9cc3c7" // the vector's v1
	swSig := sw.header.Get("webhook-signature")[len("v1,"):]
	other := base64.StdEncoding.EncodeToString(make([]byte, 32)) // a well-formed wrong signature
	for _, tt := range []struct {
		name string
		v    vector
		kv   []string // the headers changed
		ok   bool
	}{
		// octokit/webhooks-methods src/node/verify.ts compares the header
		// with "sha256=" and the lower-case hex, as strings.
		{"github: upper-case hex", gh, []string{"X-Hub-Signature-256", "sha256=" + upperHex(t, ghSig)}, false},
		// stripe-node src/Webhooks.ts: parseHeader splits on "," and then
		// "=", comparing each key as it is (" v1" is not v1, " t" not t);
		// secureCompare compares the v1 hex strings; the timestamp is
		// parseInt's, signed as that integer (stripe-go: strconv.ParseInt,
		// the same).
		{"stripe: upper-case hex", st, []string{"Stripe-Signature", "t=1533204620,v1=" + upperHex(t, stSig)}, false},
		{"stripe: a space before v1", st, []string{"Stripe-Signature", "t=1533204620, v1=" + stSig}, false},
		{"stripe: a space before t", st, []string{"Stripe-Signature", "v1=" + stSig + ", t=1533204620"}, false},
		{"stripe: v1 before t", st, []string{"Stripe-Signature", "v1=" + stSig + ",t=1533204620"}, true},
		{"stripe: t with a leading zero", st, []string{"Stripe-Signature", "t=01533204620,v1=" + stSig}, true},
		// The Standard Webhooks reference libraries (libraries/go/webhook.go,
		// libraries/javascript/src/index.ts) split webhook-signature on a
		// single space (a tab joins two entries into one), each entry on
		// ",", the signature its second field; they compare base64 strings;
		// the Go one signs the timestamp as strconv.ParseInt reads it.
		{"standard: a tab", sw, []string{"webhook-signature", "v1," + other + "\tv1," + swSig}, false},
		{"standard: a space", sw, []string{"webhook-signature", "v1," + other + " v1," + swSig}, true},
		{"standard: two spaces", sw, []string{"webhook-signature", "v1," + other + "  v1," + swSig}, true},
		{"standard: a third field", sw, []string{"webhook-signature", "v1," + swSig + ",x"}, true},
		{"standard: non-canonical base64", sw, []string{"webhook-signature", "v1," + nonCanonical(t, swSig)}, false},
		{"standard: no padding", sw, []string{"webhook-signature", "v1," + strings.TrimSuffix(swSig, "=")}, false},
		{"standard: timestamp with a leading zero", sw, []string{"webhook-timestamp", "01614265330"}, true},
		// @shopify/shopify-api lib/utils/hmac-validator.ts
		// (validateHmacString) compares base64 strings (safeCompare).
		{"shopify: non-canonical base64", sp, []string{"X-Shopify-Hmac-Sha256", nonCanonical(t, "/Redz4YXHLnSmmSN8grr5/Jl/Ua3d7yX3iWbjb8R8wo=")}, false},
		{"shopify-*: non-canonical base64", spl, []string{"Shopify-Hmac-Sha256", nonCanonical(t, shopifyJSHmac)}, false},
	} {
		err := tt.v.verify(clone(tt.v.header, tt.kv...), tt.v.body, tt.v.secret)
		if tt.ok && err != nil || !tt.ok && !errors.Is(err, webhook.ErrSignature) {
			t.Errorf("%s: %v, want ok %v", tt.name, err, tt.ok)
		}
	}
}

// TestShopifyForms: a Shopify delivery is read in the form of its HMAC
// header, the lower-case shopify-* one when both are present, as
// @shopify/shopify-api's detectWebhookType reads it (lib/webhooks/
// validate.ts): a header of the other form neither signs it nor names it,
// and its event id is that form's webhook id, never the event id.
func TestShopifyForms(t *testing.T) {
	t.Parallel()
	good, wrong := shopifyJSHmac, "/Redz4YXHLnSmmSN8grr5/Jl/Ua3d7yX3iWbjb8R8wo=" // another body's
	// Both forms, as shopify-app-js's __tests__/utils.ts headers() sends
	// an events delivery; the X-Shopify-Webhook-Id another, to tell which
	// is read.
	both := hdr("X-Shopify-Hmac-Sha256", good, "X-Shopify-Webhook-Id", "x-id",
		"shopify-hmac-sha256", good, "shopify-webhook-id", "123456789", "shopify-event-id", "event-abc")
	for _, tt := range []struct {
		name   string
		h      http.Header
		forged bool   // Verify: ErrSignature
		id     string // "": ErrNoEventID
	}{
		{"both forms", both, false, "123456789"},
		{"both, the shopify-* HMAC forged", clone(both, "shopify-hmac-sha256", wrong), true, ""},
		{"both, the X-Shopify-* HMAC forged", clone(both, "X-Shopify-Hmac-Sha256", wrong), false, "123456789"},
		{"shopify-* HMAC, X-Shopify-Webhook-Id", hdr("shopify-hmac-sha256", good, "X-Shopify-Webhook-Id", "1"), false, ""},
		{"X-Shopify-* HMAC, shopify-webhook-id", hdr("X-Shopify-Hmac-Sha256", good, "shopify-webhook-id", "1"), false, ""},
		{"X-Shopify-* HMAC, X-Shopify-Event-Id only", hdr("X-Shopify-Hmac-Sha256", good, "X-Shopify-Event-Id", "1"), false, ""},
		{"shopify-* HMAC, shopify-event-id only", hdr("shopify-hmac-sha256", good, "shopify-event-id", "1"), false, ""},
		{"shopify-* forged, X-Shopify-* good, no shopify-webhook-id", hdr("shopify-hmac-sha256", wrong,
			"X-Shopify-Hmac-Sha256", good, "X-Shopify-Webhook-Id", "1"), true, ""},
	} {
		err := webhook.Shopify().Verify(tt.h, []byte(shopifyJSBody), []string{"test_secret_key"}, time.Time{})
		if tt.forged != errors.Is(err, webhook.ErrSignature) || !tt.forged && err != nil {
			t.Errorf("%s: Verify: %v, want forged %v", tt.name, err, tt.forged)
		}
		if tt.forged {
			continue // the handler asks no event id of a forged delivery
		}
		id, err := webhook.Shopify().EventID(tt.h, []byte(shopifyJSBody))
		if tt.id == "" && !errors.Is(err, webhook.ErrNoEventID) || tt.id != "" && (err != nil || id != tt.id) {
			t.Errorf("%s: EventID = %q, %v; want %q", tt.name, id, err, tt.id)
		}
	}
}
