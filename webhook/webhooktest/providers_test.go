package webhooktest_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore/webhook"
	"github.com/fleetstore/fleetstore/webhook/webhooktest"
)

const hooks = "http://127.0.0.1:8080/hooks/acme"

func TestStandardWebhooks(t *testing.T) {
	t.Parallel()
	for _, secret := range []string{
		"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
		"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwBr", // unpadded: two = left out
	} {
		trip{
			p:    webhook.StandardWebhooks(0),
			sign: webhooktest.StandardWebhooks,
			d: webhooktest.Delivery{URL: hooks, Body: []byte(`{"type":"invoice.paid"}`),
				Secret: secret, ID: "msg_p5jXN8AQM9LWM0D4loKWxJek", Time: at},
			signed: []string{"webhook-id", "webhook-timestamp", "webhook-signature"},
			other:  "whsec_b3RoZXIgc2VjcmV0",
		}.check(t)
	}
}

func TestSvix(t *testing.T) {
	t.Parallel()
	tr := trip{
		p:    webhook.Svix(0),
		sign: webhooktest.Svix,
		d: webhooktest.Delivery{URL: hooks, Body: []byte(`{"type":"invoice.paid"}`),
			Secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", ID: "msg_2", Time: at},
		signed: []string{"svix-id", "svix-timestamp", "svix-signature"},
		other:  "whsec_b3RoZXIgc2VjcmV0",
	}
	tr.check(t)
	r, _ := tr.sent(t)
	if r.Header.Get("webhook-signature") != "" {
		t.Error("Svix sends svix-* header fields only")
	}
}

func TestShopify(t *testing.T) {
	t.Parallel()
	for _, form := range []struct {
		sign   webhooktest.Signer
		prefix string
	}{
		{webhooktest.Shopify, "X-Shopify-"},
		{webhooktest.ShopifyEvents, "Shopify-"},
	} {
		tr := trip{
			p:    webhook.Shopify(),
			sign: form.sign,
			d: webhooktest.Delivery{URL: hooks, Body: []byte(`{"id":820982911946154508}`),
				Secret: "shpss_client_secret", ID: "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043", Time: at},
			signed:   []string{form.prefix + "Hmac-Sha256"},
			unsigned: []string{form.prefix + "Webhook-Id"},
		}
		tr.check(t)
		r, _ := tr.sent(t)
		if len(r.Header) != 3 { // Content-Type and the two
			t.Errorf("%s: header %v, want only the %s form's", form.prefix, r.Header, form.prefix)
		}
	}
}

func TestSlack(t *testing.T) {
	t.Parallel()
	for _, d := range []webhooktest.Delivery{
		{Body: []byte(`{"type":"event_callback","event_id":"Ev08MFMKH6","event":{"type":"app_mention"}}`)},
		{Body: []byte("command=%2Fweather&text=94070&trigger_id=13345224609.738474920.8088930838d88f008e0")},
	} {
		d.URL, d.Secret, d.Time = hooks, "8f742231b10e8888abcd99yyyzzz85a5", at
		id, _ := webhook.Slack(0).EventID(nil, d.Body)
		trip{
			p:       webhook.Slack(0),
			sign:    webhooktest.Slack,
			d:       d,
			signed:  []string{"X-Slack-Request-Timestamp", "X-Slack-Signature"},
			eventID: id,
		}.check(t)
		if id == "" {
			t.Errorf("%s: no event id", d.Body)
		}
	}
}

func TestTwilio(t *testing.T) {
	t.Parallel()
	form := webhooktest.Delivery{URL: hooks + "?foo=1&bar=2",
		Body:   []byte("MessageSid=SM1&From=%2B14158675309&To=%2B18005551212&Body=hi&Body=ho&Body=hi"),
		Secret: "auth-token", ID: "fd0a6f5e-2a57-4e4d-9a8a-2c0d3e0f8b61", Time: at}
	js := form
	js.URL, js.Body = hooks, []byte(`{"MessageSid":"SM1"}`)
	for _, tt := range []struct {
		d   webhooktest.Delivery
		url string
	}{
		{form, ""},
		{js, hooks + "?bodySHA256=" + "3e1f2b7c0cf6b8bb8d8fc1fa8cc9cb82d3daafc8a4fa1fbf0b9bc0ea7a5af930"},
	} {
		tr := trip{
			p:        webhook.Twilio(nil),
			sign:     webhooktest.Twilio,
			d:        tt.d,
			signed:   []string{"X-Twilio-Signature"},
			unsigned: []string{"I-Twilio-Idempotency-Token"},
			url:      tt.url,
		}
		if tt.url != "" {
			// The digest is of the body: read it from the request.
			r, err := webhooktest.Twilio(tt.d)
			if err != nil {
				t.Fatal(err)
			}
			tr.url = r.URL.String()
			if !strings.HasPrefix(tr.url, hooks+"?bodySHA256=") || len(tr.url) != len(hooks)+len("?bodySHA256=")+64 {
				t.Errorf("a JSON body's URL: %s, want bodySHA256 added", tr.url)
			}
		}
		tr.check(t)
		// The signature covers the URL: a byte changed anywhere in it is refused.
		r, body := tr.sent(t)
		u := r.URL.String()
		for i := range u {
			other := string(changed([]byte(u), i))
			p := webhook.Twilio(func(*http.Request) string { return other })
			err := p.(webhook.RequestVerifier).VerifyRequest(r, body, []string{tt.d.Secret}, at)
			if !errors.Is(err, webhook.ErrSignature) {
				t.Errorf("URL byte %d changed (%s): %v, want ErrSignature", i, other, err)
			}
		}
	}
	_, err := webhooktest.Twilio(webhooktest.Delivery{URL: hooks, Body: []byte("a=%zz"), Secret: "s"})
	if err == nil || !strings.Contains(err.Error(), "Delivery.Body") {
		t.Errorf("a body neither JSON nor a form: %v, want an error naming Delivery.Body", err)
	}
}

// rfc8032Seed is RFC 8032's Ed25519 TEST 1 secret key (section 7.1).
const rfc8032Seed = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60"

func TestDiscord(t *testing.T) {
	t.Parallel()
	public, err := webhooktest.DiscordPublicKey(rfc8032Seed)
	if err != nil || public != "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a" {
		t.Fatalf("DiscordPublicKey(TEST 1) = %s, %v; want RFC 8032's TEST 1 public key", public, err)
	}
	whole, err := webhooktest.DiscordPublicKey(rfc8032Seed + public)
	if err != nil || whole != public {
		t.Errorf("DiscordPublicKey(the 64-byte key) = %s, %v; want %s", whole, err, public)
	}
	for _, bad := range []string{"", "zz", rfc8032Seed[:62]} {
		if _, err := webhooktest.DiscordPublicKey(bad); err == nil {
			t.Errorf("DiscordPublicKey(%q): no error", bad)
		}
	}
	trip{
		p:    webhook.Discord(0),
		sign: webhooktest.Discord,
		d: webhooktest.Delivery{URL: hooks, Body: []byte(`{"id":"787053080478613556","type":2,"token":"t"}`),
			Secret: rfc8032Seed, Time: at},
		secrets: []string{public},
		signed:  []string{"X-Signature-Timestamp", "X-Signature-Ed25519"},
		eventID: "787053080478613556",
		other:   "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c", // TEST 2's public key
	}.check(t)
}

func TestPaddle(t *testing.T) {
	t.Parallel()
	trip{
		p:    webhook.Paddle(0),
		sign: webhooktest.Paddle,
		d: webhooktest.Delivery{URL: hooks, Body: []byte(`{"event_id":"evt_01hsdn97563968dy0szkmgjwh3","event_type":"price.created"}`),
			Secret: "pdl_ntfset_01hsdn8d43dt7mezr1ef2jtbaw_secret", Time: at},
		signed:  []string{"Paddle-Signature"},
		eventID: "evt_01hsdn97563968dy0szkmgjwh3",
	}.check(t)
}

// TestLinear: a body without webhookTimestamp gets d.Time's, signed; one
// with it is sent as it is.
func TestLinear(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ give, want string }{
		{`{"action":"create","type":"Issue"}`, `{"action":"create","type":"Issue","webhookTimestamp":1767225600000}`},
		{"{ }\n", `{"webhookTimestamp":1767225600000}` + "\n"},
		{`{"type":"Issue","webhookTimestamp":1767225601000}`, `{"type":"Issue","webhookTimestamp":1767225601000}`},
	} {
		tr := trip{
			p:    webhook.Linear(0),
			sign: webhooktest.Linear,
			d: webhooktest.Delivery{URL: hooks, Body: []byte(tt.give), Secret: "lin_wh_secret",
				ID: "5b2f0a8e-3c1d-4e7f-9a6b-0c8d2e4f6a1b", Time: at},
			signed:   []string{"Linear-Signature"},
			unsigned: []string{"Linear-Delivery"},
			body:     []byte(tt.want),
		}
		tr.check(t)
		// The time is signed: two minutes on, the same delivery is refused.
		r, body := tr.sent(t)
		if err := webhook.Linear(0).Verify(r.Header, body, []string{tr.d.Secret}, at.Add(2*time.Minute)); !errors.Is(err, webhook.ErrSignature) {
			t.Errorf("%s two minutes on: %v, want ErrSignature", body, err)
		}
	}
}

// TestRandomIDs: without Delivery.ID, each delivery gets an id of its own,
// in the provider's spelling, and the zero Time signs at time.Now.
func TestRandomIDs(t *testing.T) {
	t.Parallel()
	d := webhooktest.Delivery{URL: hooks, Body: []byte(`{"id":"evt_1"}`), Secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}
	for _, tt := range []struct {
		p    webhook.Provider
		sign webhooktest.Signer
		form func(string) bool
	}{
		{webhook.GitHub(), webhooktest.GitHub, isUUID},
		{webhook.Shopify(), webhooktest.Shopify, isUUID},
		{webhook.Linear(0), webhooktest.Linear, isUUID},
		{webhook.Twilio(nil), webhooktest.Twilio, isUUID},
		{webhook.StandardWebhooks(0), webhooktest.StandardWebhooks, func(id string) bool {
			return strings.HasPrefix(id, "msg_") && len(id) == 36
		}},
	} {
		seen := map[string]bool{}
		for range 2 {
			r, err := tt.sign(d)
			if err != nil {
				t.Fatal(err)
			}
			body := []byte(`{"id":"evt_1"}`)
			if tt.p.Name() == "linear" {
				body = nil
			}
			id, err := tt.p.EventID(r.Header, body)
			if err != nil || !tt.form(id) || seen[id] {
				t.Errorf("%s: event id %q, %v; want a new one of the provider's form", tt.p.Name(), id, err)
			}
			seen[id] = true
			if tt.p.Name() != "twilio" && tt.p.Name() != "linear" {
				if err := tt.p.Verify(r.Header, d.Body, []string{d.Secret}, time.Now()); err != nil {
					t.Errorf("%s: signed at the zero Time, verified now: %v", tt.p.Name(), err)
				}
			}
		}
	}
}

func isUUID(id string) bool {
	return len(id) == 36 && id[8] == '-' && id[13] == '-' && id[14] == '4' && id[18] == '-' && id[23] == '-'
}
