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
}

// sent is the request tr's signer builds, and its body.
func (tr trip) sent(t *testing.T) (*http.Request, []byte) {
	t.Helper()
	r, err := tr.sign(tr.d)
	if err != nil {
		t.Fatalf("sign: %v", err)
	}
	if r.Method != http.MethodPost || r.URL.String() != tr.d.URL {
		t.Errorf("request %s %s, want POST %s", r.Method, r.URL, tr.d.URL)
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
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
	if tr.secrets != nil {
		other.secrets = []string{strings.Repeat("ab", 32)} // a key of the provider's form
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
// of the provider's own published delivery (the vectors of package
// webhook's tests, each cited there).
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
	} {
		tt.d.URL = "http://127.0.0.1/hooks"
		r, err := tt.sign(tt.d)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if got := r.Header.Get(tt.header); got != tt.want {
			t.Errorf("%s: %s = %q, want %q", tt.name, tt.header, got, tt.want)
		}
	}
}

// TestSign: Sign finds every built-in provider by its Name, and refuses
// an unknown name, naming it.
func TestSign(t *testing.T) {
	t.Parallel()
	d := webhooktest.Delivery{URL: "http://127.0.0.1/hooks", Body: []byte(`{"id":"evt_1"}`), Secret: "s"}
	for _, name := range webhooktest.Providers() {
		if _, err := webhooktest.Sign(name, d); err != nil {
			t.Errorf("Sign(%q): %v", name, err)
		}
	}
	_, err := webhooktest.Sign("gitlab", d)
	if !errors.Is(err, webhooktest.ErrUnknownProvider) || !strings.Contains(err.Error(), "gitlab") {
		t.Errorf("Sign(gitlab): %v, want ErrUnknownProvider naming it", err)
	}
}

// TestBadDelivery: no URL, a URL that does not parse and no secret are
// errors naming the field, for every provider.
func TestBadDelivery(t *testing.T) {
	t.Parallel()
	good := webhooktest.Delivery{URL: "http://127.0.0.1/hooks", Body: []byte(`{"id":"evt_1"}`), Secret: "s"}
	for _, tt := range []struct {
		field string
		d     webhooktest.Delivery
	}{
		{"URL", webhooktest.Delivery{Body: good.Body, Secret: good.Secret}},
		{"URL", webhooktest.Delivery{URL: "http://[::1", Body: good.Body, Secret: good.Secret}},
		{"Secret", webhooktest.Delivery{URL: good.URL, Body: good.Body}},
	} {
		for _, name := range webhooktest.Providers() {
			r, err := webhooktest.Sign(name, tt.d)
			if err == nil || r != nil || !strings.Contains(err.Error(), "Delivery."+tt.field) {
				t.Errorf("%s, bad %s: %v, %v; want an error naming Delivery.%s", name, tt.field, r, err, tt.field)
			}
		}
	}
}
