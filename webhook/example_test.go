package webhook_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/webhook"
)

// exampleHandler is the handler each example runs: one tenant, acme,
// whose endpoint is /hooks/acme, limited to 100 hooks an hour with a
// burst of 200 (a byte limit, fleetstore.NewByteLimit, goes beside it in
// Limits); the Sink prints what it stores.
func exampleHandler(p webhook.Provider, secret string) (http.Handler, func()) {
	store, err := fleetstore.Open("memory://")
	if err != nil {
		panic(err)
	}
	hooks := fleetstore.MustLimit(fleetstore.NewLimit(fleetstore.Hooks, 100, time.Hour, 200))
	h, err := webhook.New(webhook.Config{
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
	})
	if err != nil {
		panic(err)
	}
	return h, func() { store.Close() }
}

// deliver sends req to h twice, as a provider that redelivers does, and
// prints the answers.
func deliver(h http.Handler, req func() *http.Request) {
	for _, what := range []string{"delivery", "redelivery"} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req())
		fmt.Printf("%s: %d, RateLimit: %s\n", what, w.Code, w.Header().Get("RateLimit"))
	}
}

func hmacSHA256(key []byte, parts ...string) []byte {
	m := hmac.New(sha256.New, key)
	for _, p := range parts {
		m.Write([]byte(p))
	}
	return m.Sum(nil)
}

func ExampleGitHub() {
	h, done := exampleHandler(webhook.GitHub(), "It's a Secret to Everybody")
	defer done()
	deliver(h, func() *http.Request {
		// GitHub's docs' test delivery: body "Hello, World!" signed
		// under "It's a Secret to Everybody".
		r := httptest.NewRequest(http.MethodPost, "/hooks/acme", strings.NewReader("Hello, World!"))
		r.Header.Set("X-GitHub-Event", "ping")
		r.Header.Set("X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958")
		r.Header.Set("X-Hub-Signature-256", "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17")
		return r
	})
	// Output:
	// stored github event 72d3162e-cc78-11e3-81ab-4c9367dc0958 of acme (13 bytes)
	// delivery: 202, RateLimit: "hooks";r=199;t=36
	// redelivery: 200, RateLimit: "hooks";r=199;t=36
}

func ExampleStripe() {
	const secret = "whsec_test_secret"
	h, done := exampleHandler(webhook.Stripe(5*time.Minute), secret)
	defer done()
	body := `{"id":"evt_1NG8Du2eZvKYlo2CUI79vXWy","object":"event","type":"charge.succeeded"}`
	deliver(h, func() *http.Request {
		// Stripe-Signature: t=TIMESTAMP,v1=HMAC-SHA256("TIMESTAMP.BODY").
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		r := httptest.NewRequest(http.MethodPost, "/hooks/acme", strings.NewReader(body))
		r.Header.Set("Stripe-Signature", "t="+ts+",v1="+hex.EncodeToString(hmacSHA256([]byte(secret), ts, ".", body)))
		return r
	})
	// Output:
	// stored stripe event evt_1NG8Du2eZvKYlo2CUI79vXWy of acme (80 bytes)
	// delivery: 202, RateLimit: "hooks";r=199;t=36
	// redelivery: 200, RateLimit: "hooks";r=199;t=36
}

func ExampleStandardWebhooks() {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	h, done := exampleHandler(webhook.StandardWebhooks(0), secret)
	defer done()
	body := `{"type":"user.created","data":{"id":"u_1"}}`
	key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	deliver(h, func() *http.Request {
		// webhook-signature: v1,BASE64(HMAC-SHA256("ID.TIMESTAMP.BODY")).
		id, ts := "msg_p5jXN8AQM9LWM0D4loKWxJek", strconv.FormatInt(time.Now().Unix(), 10)
		r := httptest.NewRequest(http.MethodPost, "/hooks/acme", strings.NewReader(body))
		r.Header.Set("webhook-id", id)
		r.Header.Set("webhook-timestamp", ts)
		r.Header.Set("webhook-signature", "v1,"+base64.StdEncoding.EncodeToString(hmacSHA256(key, id, ".", ts, ".", body)))
		return r
	})
	// Output:
	// stored standard-webhooks event msg_p5jXN8AQM9LWM0D4loKWxJek of acme (43 bytes)
	// delivery: 202, RateLimit: "hooks";r=199;t=36
	// redelivery: 200, RateLimit: "hooks";r=199;t=36
}

func ExampleShopify() {
	const secret = "hush"
	h, done := exampleHandler(webhook.Shopify(), secret)
	defer done()
	body := `{"id":820982911946154508,"email":"jon@example.com"}`
	deliver(h, func() *http.Request {
		// X-Shopify-Hmac-Sha256: BASE64(HMAC-SHA256(BODY)).
		r := httptest.NewRequest(http.MethodPost, "/hooks/acme", strings.NewReader(body))
		r.Header.Set("X-Shopify-Topic", "orders/create")
		r.Header.Set("X-Shopify-Event-Id", "98880550-7158-44d4-b7cd-2c97c8a091b5")
		r.Header.Set("X-Shopify-Hmac-Sha256", base64.StdEncoding.EncodeToString(hmacSHA256([]byte(secret), body)))
		return r
	})
	// Output:
	// stored shopify event 98880550-7158-44d4-b7cd-2c97c8a091b5 of acme (51 bytes)
	// delivery: 202, RateLimit: "hooks";r=199;t=36
	// redelivery: 200, RateLimit: "hooks";r=199;t=36
}

// A forged delivery is refused before the Store is asked: it spends no
// quota and holds no claim.
func ExampleNew_forged() {
	h, done := exampleHandler(webhook.GitHub(), "It's a Secret to Everybody")
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
