package webhooktest_test

import (
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore/webhook"
	"github.com/fleetstore/fleetstore/webhook/webhooktest"
)

// trip is one provider's round trip: what its signer builds from d, the
// provider of package webhook verifies with secrets, at d.Time.
type trip struct {
	p    webhook.Provider
	sign webhooktest.Signer
	d    webhooktest.Delivery
	// secrets are what the handler holds; nil means d.Secret (Discord's
	// is the public key of d's private one).
	secrets []string
	// signed are the header fields the signature covers, every byte;
	// unsigned those it does not (an event id the provider leaves out):
	// changed, the delivery still verifies.
	signed, unsigned []string
	eventID          string // want: "" means d.ID
	// other is a secret of the provider's form that did not sign d;
	// "" means "another-secret".
	other string
	// url and body are the request's, when not d's: Twilio's URL of a
	// JSON body, Linear's body given a webhookTimestamp.
	url  string
	body []byte
}

// sent is the request tr's signer builds, and its body.
func (tr trip) sent(t *testing.T) (*http.Request, []byte) {
	t.Helper()
	r, err := tr.sign(tr.d)
	if err != nil {
		t.Fatalf("sign: %v", err)
	}
	wantURL, wantBody := tr.d.URL, tr.d.Body
	if tr.url != "" {
		wantURL = tr.url
	}
	if tr.body != nil {
		wantBody = tr.body
	}
	if r.Method != http.MethodPost || r.URL.String() != wantURL {
		t.Errorf("request %s %s, want POST %s", r.Method, r.URL, wantURL)
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	if string(body) != string(wantBody) {
		t.Errorf("body %q, want %q", body, wantBody)
	}
	return r, body
}

func (tr trip) verify(r *http.Request, body []byte) error {
	secrets := tr.secrets
	if secrets == nil {
		secrets = []string{tr.d.Secret}
	}
	if rv, ok := tr.p.(webhook.RequestVerifier); ok {
		return rv.VerifyRequest(r, body, secrets, tr.d.Time)
	}
	return tr.p.Verify(r.Header, body, secrets, tr.d.Time)
}

// check: the signed request verifies and names the event; a byte changed
// anywhere in the body or in a signed header field is refused
// (ErrSignature), another secret too; a change to an unsigned field is
// not.
func (tr trip) check(t *testing.T) {
	t.Helper()
	r, body := tr.sent(t)
	if err := tr.verify(r, body); err != nil {
		t.Fatalf("the signed delivery: %v", err)
	}
	want := tr.eventID
	if want == "" {
		want = tr.d.ID
	}
	if id, err := tr.p.EventID(r.Header, body); err != nil || id != want {
		t.Errorf("EventID = %q, %v; want %q", id, err, want)
	}
	for i := range body {
		b := changed(body, i)
		if err := tr.verify(r, b); !errors.Is(err, webhook.ErrSignature) {
			t.Errorf("body byte %d changed (%q): %v, want ErrSignature", i, b, err)
		}
	}
	for _, name := range tr.signed {
		v := r.Header.Get(name)
		if v == "" {
			t.Errorf("no %s", name)
		}
		for i := range v {
			c := r.Clone(r.Context())
			c.Header.Set(name, string(changed([]byte(v), i)))
			if err := tr.verify(c, body); !errors.Is(err, webhook.ErrSignature) {
				t.Errorf("%s byte %d changed (%q): %v, want ErrSignature", name, i, c.Header.Get(name), err)
			}
		}
	}
	for _, name := range tr.unsigned {
		c := r.Clone(r.Context())
		c.Header.Set(name, r.Header.Get(name)+"-replayed")
		if err := tr.verify(c, body); err != nil {
			t.Errorf("%s, which the signature does not cover, changed: %v", name, err)
		}
	}
	other := tr
	other.secrets = []string{"another-secret"}
	if tr.other != "" {
		other.secrets = []string{tr.other}
	}
	if err := other.verify(r, body); !errors.Is(err, webhook.ErrSignature) {
		t.Errorf("verified with another secret: %v, want ErrSignature", err)
	}
}

// changed is b with its byte i changed by one bit, in a copy.
func changed(b []byte, i int) []byte {
	c := append([]byte(nil), b...)
	c[i] ^= 1
	return c
}

var at = time.Unix(1767225600, 0) // 2026-01-01, the signing time of the trips

func TestGitHub(t *testing.T) {
	t.Parallel()
	trip{
		p:    webhook.GitHub(),
		sign: webhooktest.GitHub,
		d: webhooktest.Delivery{URL: "http://127.0.0.1:8080/hooks/github/acme",
			Body: []byte(`{"zen":"Keep it logically awesome.","hook_id":1}`), Secret: "It's a Secret to Everybody",
			ID: "72d3162e-cc78-11e3-81ab-4c9367dc0958", Time: at},
		signed:   []string{"X-Hub-Signature-256"},
		unsigned: []string{"X-GitHub-Delivery"},
	}.check(t)
}

func TestStripe(t *testing.T) {
	t.Parallel()
	trip{
		p:    webhook.Stripe(0),
		sign: webhooktest.Stripe,
		d: webhooktest.Delivery{URL: "http://127.0.0.1:8080/hooks/stripe/acme",
			Body: []byte(`{"id":"evt_1","object":"event","type":"customer.created"}`), Secret: "whsec_test", Time: at},
		signed:  []string{"Stripe-Signature"},
		eventID: "evt_1",
	}.check(t)
}

// TestPublished: what each signer builds is, byte for byte, the signature
// of the provider's own published delivery: the vectors of package
// webhook's tests, each cited there with its full path (Discord publishes
// none: RFC 8032's key signs there).
func TestPublished(t *testing.T) {
	t.Parallel()
	stripeEvent, err := os.ReadFile("testdata/stripe-dotnet-event.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name   string
		sign   webhooktest.Signer
		d      webhooktest.Delivery
		header string
		want   string
	}{
		{
			// docs.github.com, "Validating webhook deliveries".
			"github", webhooktest.GitHub,
			webhooktest.Delivery{Body: []byte("Hello, World!"), Secret: "It's a Secret to Everybody"},
			"X-Hub-Signature-256", "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17",
		},
		{
			// stripe-dotnet, src/StripeTests/Services/Events/EventUtilityTest.cs
			// over src/StripeTests/Resources/event_test_signature.json
			// (testdata/stripe-dotnet-event.json); its v0 entry is not signed.
			"stripe", webhooktest.Stripe,
			webhooktest.Delivery{Body: stripeEvent, Secret: "webhook_secret", Time: time.Unix(1533204620, 0)},
			"Stripe-Signature", "t=1533204620,v1=2220f87ef101a04665f11cdf770523143f875572008577fa0f20882ddb9cc3c7",
		},
		{
			// The Standard Webhooks reference library,
			// libraries/go/webhook_test.go, TestWebhookSign.
			"standard-webhooks", webhooktest.StandardWebhooks,
			webhooktest.Delivery{Body: []byte(`{"test": 2432232314}`), Secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
				ID: "msg_p5jXN8AQM9LWM0D4loKWxJek", Time: time.Unix(1614265330, 0)},
			"webhook-signature", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
		},
		{
			// A secret without its padding, signed by the reference Python
			// library and npm's standardwebhooks and svix (webhook's
			// provider_test.go says how).
			"standard-webhooks unpadded", webhooktest.StandardWebhooks,
			webhooktest.Delivery{Body: []byte(`{"test": 2432232314}`), Secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaS",
				ID: "msg_p5jXN8AQM9LWM0D4loKWxJek", Time: time.Unix(1614265330, 0)},
			"webhook-signature", "v1,LVOXivKoo4FWasi/IaHvzhE/u+7/cu2AME+zS/nXqzk=",
		},
		{
			// shopify-api-php, tests/Webhooks/RegistryTest.php, testProcessWebhook.
			"shopify", webhooktest.Shopify,
			webhooktest.Delivery{Body: []byte(`{"foo":"bar"}`), Secret: "steffi"},
			"X-Shopify-Hmac-Sha256", "/Redz4YXHLnSmmSN8grr5/Jl/Ua3d7yX3iWbjb8R8wo=",
		},
		{
			// @shopify/shopify-api, lib/webhooks/__tests__/validate.test.ts,
			// "validates events webhooks with lowercase headers".
			"shopify events", webhooktest.ShopifyEvents,
			webhooktest.Delivery{Body: []byte(`{"foo": "bar"}`), Secret: "test_secret_key"},
			"Shopify-Hmac-Sha256", "B23tXN681gZ0qIWNRrgtzBE9XSDo5yaUu6wfmhu3a7g=",
		},
		{
			// Slack's docs, "Verifying requests from Slack", as
			// python-slack-sdk's test_signature_verifier.py has it.
			"slack", webhooktest.Slack,
			webhooktest.Delivery{Body: []byte("token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"),
				Secret: "8f742231b10e8888abcd99yyyzzz85a5", Time: time.Unix(1531420618, 0)},
			"X-Slack-Signature", "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503",
		},
		{
			// twilio-python, tests/unit/test_request_validator.py.
			"twilio", webhooktest.Twilio,
			webhooktest.Delivery{URL: "https://mycompany.com/myapp.php?foo=1&bar=2",
				Body:   []byte("CallSid=CA1234567890ABCDE&Caller=%2B14158675309&Digits=1234&From=%2B14158675309&To=%2B18005551212"),
				Secret: "12345"},
			"X-Twilio-Signature", "RSOYDt4T1cUTdK1PDd93/VVr8B8=",
		},
		{
			// The same, a JSON body signed through the URL's bodySHA256.
			"twilio json", webhooktest.Twilio,
			webhooktest.Delivery{URL: "https://mycompany.com/myapp.php?foo=1&bar=2",
				Body: []byte(`{"property": "value", "boolean": true}`), Secret: "12345"},
			"X-Twilio-Signature", "a9nBmqA0ju/hNViExpshrM61xv4=",
		},
		{
			// RFC 8032's Ed25519 TEST 1 key over discord-interactions-js's
			// applicationCommandRequestBody (webhook's discord_test.go).
			"discord", webhooktest.Discord,
			webhooktest.Delivery{Body: []byte(`{"id":"787053080478613556","token":"ThisIsATokenFromDiscordThatIsVeryLong","type":2,"version":1,"data":{"id":"787053080478613554","name":"test"}}`),
				Secret: rfc8032Seed, Time: time.Unix(1700000000, 0)},
			"X-Signature-Ed25519", "4cbcce90ca257785667295862f258f4920233243b91c2694b14b52d9689c2a5c" +
				"8dbb476e87eea64cbe841f6ced59e19beb307e4d38b21fccdb4a825be6aeb908",
		},
		{
			// paddle-go-sdk, example_webhook_verifier_test.go.
			"paddle", webhooktest.Paddle,
			webhooktest.Delivery{Body: []byte(`{"data":{"id":"pri_01hsdn96k2hxjzsq5yerecdj9j","name":null,"status":"active","quantity":{"maximum":999999,"minimum":1},"tax_mode":"account_setting","product_id":"pro_01hsdn8qp7yydry3x1yeg6a9rv","unit_price":{"amount":"1000","currency_code":"USD"},"custom_data":null,"description":"testing","import_meta":null,"trial_period":null,"billing_cycle":{"interval":"month","frequency":1},"unit_price_overrides":[]},"event_id":"evt_01hsdn97563968dy0szkmgjwh3","event_type":"price.created","occurred_at":"2024-03-20T10:07:35.590857Z","notification_id":"ntf_01hsdn977e920kbgzt6r6c9rqc"}`),
				Secret: "pdl_ntfset_01hsdn8d43dt7mezr1ef2jtbaw_hKkRiCGyyRhbFwIUuqiTBgI7gnWoV0Gr", Time: time.Unix(1710929255, 0)},
			"Paddle-Signature", "ts=1710929255;h1=6c05ef8fa83c44d751be6d259ec955ce5638e2c54095bf128e408e2fce1589c8",
		},
		{
			// The Linear SDK's LinearWebhooks.test.ts (webhook's linear_test.go):
			// the body has its webhookTimestamp, sent as it is.
			"linear", webhooktest.Linear,
			webhooktest.Delivery{Body: []byte(`{"action":"create","data":{"id":"2174add1-f7c8-44e3-bbf3-2d60b5ea8bc9","createdAt":"2020-01-23T12:53:18.084Z","updatedAt":"2020-01-23T12:53:18.084Z","archivedAt":null,"body":"Indeed, I think this is definitely an improvement over the previous version.","edited":false,"issueId":"539068e2-ae88-4d09-bd75-22eb4a59612f","userId":"aacdca22-6266-4c0a-ab3c-8fa70a26765c"},"type":"Comment","url":"https://linear.app/issue/LIN-1778/foo-bar#comment-77217de3-fb52-4dad-bb9a-b356beb93de8","createdAt":"2020-01-23T12:53:18.084Z","webhookTimestamp":1677611643000}`),
				Secret: "SECRET", Time: time.Unix(1700000000, 0)},
			"Linear-Signature", "8790fcbbea809950be9198408593c2a13f7591bba6c61adb589f709b5e1b186a",
		},
	} {
		if tt.d.URL == "" {
			tt.d.URL = "http://127.0.0.1/hooks"
		}
		r, err := tt.sign(tt.d)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if got := r.Header.Get(tt.header); got != tt.want {
			t.Errorf("%s: %s = %q, want %q", tt.name, tt.header, got, tt.want)
		}
	}
}

// secretOf is a secret of each provider's form.
func secretOf(provider string) string {
	switch provider {
	case "standard-webhooks":
		return "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	case "svix":
		return "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwBr" // without its == padding
	case "discord":
		return rfc8032Seed
	}
	return "s"
}

// TestSign: Sign finds every built-in provider by its Name, and refuses
// an unknown name, naming it.
func TestSign(t *testing.T) {
	t.Parallel()
	d := webhooktest.Delivery{URL: "http://127.0.0.1/hooks", Body: []byte(`{"id":"evt_1"}`), Secret: "s"}
	if got := len(webhooktest.Providers()); got != 10 {
		t.Errorf("Providers: %d names, want the 10 built-in providers'", got)
	}
	for _, name := range webhooktest.Providers() {
		d.Secret = secretOf(name)
		if _, err := webhooktest.Sign(name, d); err != nil {
			t.Errorf("Sign(%q): %v", name, err)
		}
	}
	_, err := webhooktest.Sign("gitlab", d)
	if !errors.Is(err, webhooktest.ErrUnknownProvider) || !strings.Contains(err.Error(), "gitlab") {
		t.Errorf("Sign(gitlab): %v, want ErrUnknownProvider naming it", err)
	}
}

// TestBadDelivery: no URL, a URL that does not parse or is not absolute,
// and no secret are errors naming the field, for every provider; so are
// secrets not of the provider's form.
func TestBadDelivery(t *testing.T) {
	t.Parallel()
	good := webhooktest.Delivery{URL: "http://127.0.0.1/hooks", Body: []byte(`{"id":"evt_1"}`), Secret: "s"}
	for _, tt := range []struct {
		field string
		d     webhooktest.Delivery
	}{
		{"URL", webhooktest.Delivery{Body: good.Body, Secret: good.Secret}},
		{"URL", webhooktest.Delivery{URL: "http://[::1", Body: good.Body, Secret: good.Secret}},
		{"URL", webhooktest.Delivery{URL: "/hooks", Body: good.Body, Secret: good.Secret}},
		{"Secret", webhooktest.Delivery{URL: good.URL, Body: good.Body}},
	} {
		for _, name := range webhooktest.Providers() {
			if tt.d.Secret != "" {
				tt.d.Secret = secretOf(name)
			}
			r, err := webhooktest.Sign(name, tt.d)
			if err == nil || r != nil || !strings.Contains(err.Error(), "Delivery."+tt.field) {
				t.Errorf("%s, bad %s: %v, %v; want an error naming Delivery.%s", name, tt.field, r, err, tt.field)
			}
		}
	}
}

func TestBadSecret(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		sign   webhooktest.Signer
		secret string
	}{
		{webhooktest.StandardWebhooks, "whsec_!!!"},
		{webhooktest.Svix, "whsec_"},
		{webhooktest.Discord, "not hex"},
		{webhooktest.Discord, rfc8032Seed[:32]},
	} {
		r, err := tt.sign(webhooktest.Delivery{URL: "http://127.0.0.1/hooks", Body: []byte(`{}`), Secret: tt.secret})
		if err == nil || r != nil || !strings.Contains(err.Error(), "Delivery.Secret") ||
			len(tt.secret) > len("whsec_") && strings.Contains(err.Error(), tt.secret) {
			t.Errorf("secret %q: %v, %v; want an error naming Delivery.Secret, not quoting it", tt.secret, r, err)
		}
	}
}

// TestHeader: Delivery.Header is sent, after the signature's fields: one
// of the signature's name replaces it, and the delivery is then refused.
func TestHeader(t *testing.T) {
	t.Parallel()
	d := webhooktest.Delivery{URL: "http://127.0.0.1/hooks", Body: []byte(`{}`), Secret: "s",
		Header: http.Header{"X-Github-Event": {"ping"}}}
	r, err := webhooktest.GitHub(d)
	if err != nil || r.Header.Get("X-GitHub-Event") != "ping" {
		t.Fatalf("X-GitHub-Event %q, %v; want ping", r.Header.Get("X-GitHub-Event"), err)
	}
	d.Header.Set("X-Hub-Signature-256", "sha256="+strings.Repeat("0", 64))
	r, _ = webhooktest.GitHub(d)
	err = webhook.GitHub().Verify(r.Header, d.Body, []string{"s"}, time.Now())
	if !errors.Is(err, webhook.ErrSignature) {
		t.Errorf("a signature replaced by Delivery.Header: %v, want ErrSignature", err)
	}
}
