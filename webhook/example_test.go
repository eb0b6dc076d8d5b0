package webhook_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/webhook"
)

// exampleHandler is the handler each example runs: one tenant, acme,
// whose endpoint is /hooks/acme, limited to 100 hooks an hour with a
// burst of 200 (a byte limit, fleetstore.NewByteLimit, goes beside it in
// Limits); the Sink prints what it stores. The handler's clock (Now, for
// the providers' timestamp tolerance) is received, when the delivery was
// signed at a fixed time in the provider's own example; zero: time.Now.
func exampleHandler(p webhook.Provider, secret string, received time.Time) (http.Handler, func()) {
	store, err := fleetstore.Open("memory://")
	if err != nil {
		panic(err)
	}
	hooks := fleetstore.MustLimit(fleetstore.NewLimit(fleetstore.Hooks, 100, time.Hour, 200))
	cfg := webhook.Config{
		Store:    store,
		Provider: p,
		Secrets:  func(tenant string) ([]string, error) { return []string{secret}, nil },
		Tenant: func(r *http.Request, _ []byte) (string, error) {
			return strings.TrimPrefix(r.URL.Path, "/hooks/"), nil
		},
		Sink: webhook.SinkFunc(func(ctx context.Context, h *webhook.Hook) error {
			fmt.Printf("stored %s event %s of %s (%d bytes)\n", h.Source, h.EventID, h.Tenant, len(h.Body))
			return nil // durable: the handler commits the claim and answers 202
		}),
		Limits: []fleetstore.Limit{hooks},
	}
	if !received.IsZero() {
		cfg.Now = func() time.Time { return received }
	}
	h, err := webhook.New(cfg)
	if err != nil {
		panic(err)
	}
	return h, func() { store.Close() }
}

// deliver sends the delivery of header and body to h twice, as a provider
// that redelivers does, and prints the answers.
func deliver(h http.Handler, header http.Header, body string) {
	for _, what := range []string{"delivery", "redelivery"} {
		r := httptest.NewRequest(http.MethodPost, "/hooks/acme", strings.NewReader(body))
		r.Header = header.Clone()
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Printf("%s: %d, RateLimit: %s\n", what, w.Code, w.Header().Get("RateLimit"))
	}
}

// GitHub's docs' test delivery ("Validating webhook deliveries"): the body
// "Hello, World!" signed under "It's a Secret to Everybody".
func ExampleGitHub() {
	h, done := exampleHandler(webhook.GitHub(), "It's a Secret to Everybody", time.Time{})
	defer done()
	deliver(h, http.Header{
		"X-Github-Event":      {"ping"},
		"X-Github-Delivery":   {"72d3162e-cc78-11e3-81ab-4c9367dc0958"},
		"X-Hub-Signature-256": {"sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"},
	}, "Hello, World!")
	// Output:
	// stored github event 72d3162e-cc78-11e3-81ab-4c9367dc0958 of acme (13 bytes)
	// delivery: 202, RateLimit: "hooks";r=199;t=36
	// redelivery: 200, RateLimit: "hooks";r=199;t=36
}

// Stripe's official .NET library's test delivery (stripe-dotnet,
// EventUtilityTest.cs): its event fixture signed under "webhook_secret"
// at t=1533204620, received 100 s later (within the 5 minutes' tolerance).
func ExampleStripe() {
	h, done := exampleHandler(webhook.Stripe(5*time.Minute), "webhook_secret", time.Unix(1533204620+100, 0))
	defer done()
	deliver(h, http.Header{"Stripe-Signature": {stripeDotnetSignature}}, stripeDotnetEvent)
	// Output:
	// stored stripe event evt_123 of acme (484 bytes)
	// delivery: 202, RateLimit: "hooks";r=199;t=36
	// redelivery: 200, RateLimit: "hooks";r=199;t=36
}

// The Standard Webhooks reference library's test delivery
// (standard-webhooks, libraries/go/webhook_test.go), received a minute
// after it was signed.
func ExampleStandardWebhooks() {
	h, done := exampleHandler(webhook.StandardWebhooks(0), "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", time.Unix(1614265330+60, 0))
	defer done()
	deliver(h, http.Header{
		"Webhook-Id":        {"msg_p5jXN8AQM9LWM0D4loKWxJek"},
		"Webhook-Timestamp": {"1614265330"},
		"Webhook-Signature": {"v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="},
	}, `{"test": 2432232314}`)
	// Output:
	// stored standard-webhooks event msg_p5jXN8AQM9LWM0D4loKWxJek of acme (20 bytes)
	// delivery: 202, RateLimit: "hooks";r=199;t=36
	// redelivery: 200, RateLimit: "hooks";r=199;t=36
}

// Shopify's official PHP library's test delivery (shopify-api-php,
// tests/Webhooks/RegistryTest.php) signed under "steffi", with the ids of
// Shopify's docs' example headers (shopify.dev/docs/apps/build/webhooks):
// the event id is the webhook id.
func ExampleShopify() {
	h, done := exampleHandler(webhook.Shopify(), "steffi", time.Time{})
	defer done()
	deliver(h, http.Header{
		"X-Shopify-Topic":       {"products/update"},
		"X-Shopify-Event-Id":    {"98880550-7158-44d4-b7cd-2c97c8a091b5"},
		"X-Shopify-Webhook-Id":  {"b54557e4-bdd9-4b37-8a5f-bf7d70bcd043"},
		"X-Shopify-Hmac-Sha256": {"/Redz4YXHLnSmmSN8grr5/Jl/Ua3d7yX3iWbjb8R8wo="},
	}, `{"foo":"bar"}`)
	// Output:
	// stored shopify event b54557e4-bdd9-4b37-8a5f-bf7d70bcd043 of acme (13 bytes)
	// delivery: 202, RateLimit: "hooks";r=199;t=36
	// redelivery: 200, RateLimit: "hooks";r=199;t=36
}

// The official @shopify/shopify-api's test delivery in the lower-case
// shopify-* headers (shopify-app-js, lib/webhooks/__tests__/validate.test.ts,
// "validates events webhooks with lowercase headers"), signed under
// "test_secret_key"; the event id is its shopify-webhook-id.
func ExampleShopify_lowerCaseHeaders() {
	h, done := exampleHandler(webhook.Shopify(), "test_secret_key", time.Time{})
	defer done()
	header := http.Header{}
	header.Set("shopify-topic", "Product")
	header.Set("shopify-event-id", "event-abc")
	header.Set("shopify-webhook-id", "123456789")
	header.Set("shopify-hmac-sha256", "B23tXN681gZ0qIWNRrgtzBE9XSDo5yaUu6wfmhu3a7g=")
	deliver(h, header, `{"foo": "bar"}`)
	// Output:
	// stored shopify event 123456789 of acme (14 bytes)
	// delivery: 202, RateLimit: "hooks";r=199;t=36
	// redelivery: 200, RateLimit: "hooks";r=199;t=36
}

// A forged delivery is refused before the Store is asked: it spends no
// quota and holds no claim.
func ExampleNew_forged() {
	h, done := exampleHandler(webhook.GitHub(), "It's a Secret to Everybody", time.Time{})
	defer done()
	r := httptest.NewRequest(http.MethodPost, "/hooks/acme", strings.NewReader("Hello, World!"))
	r.Header.Set("X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958")
	r.Header.Set("X-Hub-Signature-256", "sha256="+strings.Repeat("0", 64))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	fmt.Printf("%d %q, RateLimit: %q\n", w.Code, strings.TrimSpace(w.Body.String()), w.Header().Get("RateLimit"))
	// Output:
	// 401 "signature verification failed", RateLimit: ""
}
