package webhooktest_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/webhook"
	"github.com/fleetstore/fleetstore/webhook/webhooktest"
)

// TestHandler: each provider's signed delivery, sent over HTTP to a
// handler of package webhook, is stored once and answered as stored; sent
// again (a redelivery), it is a Duplicate, 200; signed with another
// secret, it is 401 and not stored.
func TestHandler(t *testing.T) {
	t.Parallel()
	bodies := map[string]string{
		"stripe":  `{"id":"evt_1","type":"customer.created"}`,
		"slack":   `{"type":"event_callback","event_id":"Ev1"}`,
		"discord": `{"id":"787053080478613556","type":2,"token":"t","data":{"name":"test"}}`,
		"paddle":  `{"event_id":"evt_01","event_type":"price.created"}`,
		"twilio":  "MessageSid=SM1&Body=hi",
	}
	providers := map[string]webhook.Provider{
		"github": webhook.GitHub(), "stripe": webhook.Stripe(0),
		"standard-webhooks": webhook.StandardWebhooks(0), "svix": webhook.Svix(0),
		"shopify": webhook.Shopify(), "slack": webhook.Slack(0), "twilio": webhook.Twilio(nil),
		"discord": webhook.Discord(0), "paddle": webhook.Paddle(0), "linear": webhook.Linear(0),
	}
	for _, name := range webhooktest.Providers() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p := providers[name]
			if p == nil {
				t.Fatalf("no provider %q", name)
			}
			secret := secretOf(name)
			held := secret
			if name == "discord" {
				held, _ = webhooktest.DiscordPublicKey(secret)
			}
			stored := map[string]int{}
			var mu sync.Mutex
			srv := httptest.NewServer(handler(t, p, held, func(h *webhook.Hook) {
				mu.Lock()
				stored[h.EventID]++
				mu.Unlock()
			}))
			defer srv.Close()
			body, ok := bodies[name]
			if !ok {
				body = `{"action":"create"}`
			}
			d := webhooktest.Delivery{URL: srv.URL + "/hooks/acme", Body: []byte(body), Secret: secret,
				ID: "0b7e1c2a-5d3f-4e8a-9c6b-1f2e3d4c5b6a"}
			count := func() int {
				mu.Lock()
				defer mu.Unlock()
				n := 0
				for _, times := range stored {
					n += times
				}
				return n
			}
			if code := send(t, srv, name, d); code < 200 || code > 299 || count() != 1 {
				t.Errorf("the delivery: %d, stored %d times; want 2xx, stored once", code, count())
			}
			if code := send(t, srv, name, d); code != http.StatusOK || count() != 1 {
				t.Errorf("its redelivery: %d, stored %d times; want 200 (Duplicate), stored once", code, count())
			}
			forged := d
			forged.ID = "f0f0f0f0-5d3f-4e8a-9c6b-1f2e3d4c5b6a"
			forged.Secret = "another-secret"
			switch name {
			case "standard-webhooks", "svix":
				forged.Secret = "whsec_b3RoZXIgc2VjcmV0"
			case "discord":
				forged.Secret = rfc8032Seed[:63] + "1" // another key
			}
			if code := send(t, srv, name, forged); code != http.StatusUnauthorized || count() != 1 {
				t.Errorf("signed with another secret: %d, stored %d times; want 401, stored once", code, count())
			}
		})
	}
}

// send signs d as provider signs it and sends it to srv: the status.
func send(t *testing.T, srv *httptest.Server, provider string, d webhooktest.Delivery) int {
	t.Helper()
	r, err := webhooktest.Sign(provider, d)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.Client().Do(r)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// handler is a handler of p, on a memory store, for the tenant acme at
// /hooks/acme, whose secret is secret; stored is called with each hook the
// Sink stores.
func handler(t *testing.T, p webhook.Provider, secret string, stored func(*webhook.Hook)) http.Handler {
	t.Helper()
	st, err := fleetstore.Open("memory://")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	hooks := fleetstore.MustLimit(fleetstore.NewLimit(fleetstore.Hooks, 100, time.Hour, 100))
	h, err := webhook.New(webhook.Config{
		Store:    st,
		Provider: p,
		Secrets:  func(string) ([]string, error) { return []string{secret}, nil },
		Tenant:   func(*http.Request, []byte) (string, error) { return "acme", nil },
		Sink: webhook.SinkFunc(func(_ context.Context, h *webhook.Hook) error {
			stored(h)
			return nil
		}),
		Limits: []fleetstore.Limit{hooks},
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}
