package webhook_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore/webhook"
)

// Twilio's published vectors: the official twilio-python library's tests
// (github.com/twilio/twilio-python tests/unit/test_request_validator.py):
// auth token "12345", the URL and POST parameters below, and the
// X-Twilio-Signature of each case there. The form body is those
// parameters url-encoded (their order is not signed). The
// I-Twilio-Idempotency-Token is ours: it is not signed, and the vector has
// none.
const (
	twilioToken     = "12345"
	twilioURL       = "https://mycompany.com/myapp.php?foo=1&bar=2"
	twilioForm      = "CallSid=CA1234567890ABCDE&Caller=%2B14158675309&Digits=1234&From=%2B14158675309&To=%2B18005551212"
	twilioSignature = "RSOYDt4T1cUTdK1PDd93/VVr8B8="
	twilioEventID   = "fd0a6f5e-2a57-4e4d-9a8a-2c0d3e0f8b61"
)

var twilioSigned = signed{
	p:      webhook.Twilio(nil),
	target: twilioURL,
	header: hdr("X-Twilio-Signature", twilioSignature,
		"I-Twilio-Idempotency-Token", twilioEventID),
	body:    twilioForm,
	secret:  twilioToken,
	other:   "54321",
	eventID: twilioEventID,
}

// TestTwilio: the vector verifies, through the request's own URL;
// tampering, another token and malformed headers are refused.
func TestTwilio(t *testing.T) {
	t.Parallel()
	s := twilioSigned
	s.check(t, twilioSignature)
	s.malformed(t, twilioSignature, map[string]http.Header{
		"no signature": clone(s.header, "X-Twilio-Signature", ""),
		"hex":          clone(s.header, "X-Twilio-Signature", "4523b60edd84f5d5b8ad4f0ddf77dff555abf01f"),
		"no padding":   clone(s.header, "X-Twilio-Signature", strings.TrimRight(twilioSignature, "=")),
		"garbage":      clone(s.header, "X-Twilio-Signature", "!!!"),
	})
	if webhook.Twilio(nil).Retries() {
		t.Error("Twilio does not retry an error by default")
	}
	if err := webhook.Twilio(nil).Verify(s.header, []byte(s.body), []string{s.secret}, s.now); !errors.Is(err, webhook.ErrSignature) {
		t.Errorf("Verify, without the URL: %v, want ErrSignature", err)
	}
}

// TestTwilioURLs: the other cases of twilio-python's tests — the URL
// signed with or without its port, a repeated parameter, a JSON body
// signed through bodySHA256 — and the URL the provider called: publicURL's
// when set, the request's own (scheme from r.TLS) when nil.
func TestTwilioURLs(t *testing.T) {
	t.Parallel()
	const dupForm = "Sid=CA123&SidAccount=AC123&Digits=5678&Digits=1234"
	const jsonBody = `{"property": "value", "boolean": true}`
	const bodyURL = twilioURL + "&bodySHA256=0a1ff7634d9ab3b95db5c9a2dfe9416e41502b283a80c7cf19632632f96e6620"
	for _, tt := range []struct {
		name, url, body, sig string
		ok                   bool
	}{
		{"the vector", twilioURL, twilioForm, twilioSignature, true},
		{"https, a port, signed without", strings.Replace(twilioURL, ".com", ".com:1234", 1), twilioForm, twilioSignature, true},
		{"http, a port, signed with it", "http://mycompany.com:1234/myapp.php?foo=1&bar=2", twilioForm, "Zmvh+3yNM1Phv2jhDCwEM3q5ebU=", true},
		{"https, signed with :443", twilioURL, twilioForm, "kvajT1Ptam85bY51eRf/AJRuM3w=", true},
		{"http, signed with :80", "http://mycompany.com/myapp.php?foo=1&bar=2", twilioForm, "0ZXoZLH/DfblKGATFgpif+LLRf4=", true},
		{"a repeated parameter", twilioURL, dupForm, "IK+Dwps556ElfBT0I3Rgjkr1wJU=", true},
		{"a repeated parameter, reordered", twilioURL, "Digits=1234&Sid=CA123&Digits=5678&SidAccount=AC123", "IK+Dwps556ElfBT0I3Rgjkr1wJU=", true},
		{"a value repeated", twilioURL, dupForm + "&Digits=1234", "IK+Dwps556ElfBT0I3Rgjkr1wJU=", true},
		{"a JSON body, bodySHA256", bodyURL, jsonBody, "a9nBmqA0ju/hNViExpshrM61xv4=", true},
		{"another JSON body, bodySHA256", bodyURL, `{"property": "value", "boolean": false}`, "a9nBmqA0ju/hNViExpshrM61xv4=", false},
		{"http, signed as https", "http://mycompany.com/myapp.php?foo=1&bar=2", twilioForm, twilioSignature, false},
		{"another path", "https://mycompany.com/myapp.php?foo=1&bar=3", twilioForm, twilioSignature, false},
		{"a parameter more", twilioURL, twilioForm + "&x=1", twilioSignature, false},
		{"not a form", twilioURL, twilioForm + "&%zz", twilioSignature, false},
	} {
		h := hdr("X-Twilio-Signature", tt.sig)
		err := verifyAt(webhook.Twilio(nil), tt.url, h, tt.body, []string{twilioToken}, time.Time{})
		if tt.ok && err != nil || !tt.ok && !errors.Is(err, webhook.ErrSignature) {
			t.Errorf("%s: %v, want ok %v", tt.name, err, tt.ok)
		}
	}

	// Behind a proxy: the handler is reached at another URL; publicURL
	// names the one Twilio called.
	behind := "http://10.0.0.7:8080/hooks/acme?foo=1&bar=2"
	h := hdr("X-Twilio-Signature", twilioSignature)
	if err := verifyAt(webhook.Twilio(nil), behind, h, twilioForm, []string{twilioToken}, time.Time{}); !errors.Is(err, webhook.ErrSignature) {
		t.Errorf("the internal URL verified: %v", err)
	}
	public := webhook.Twilio(func(r *http.Request) string {
		return "https://mycompany.com/myapp.php?" + r.URL.RawQuery
	})
	if err := verifyAt(public, behind, h, twilioForm, []string{twilioToken}, time.Time{}); err != nil {
		t.Errorf("publicURL: %v", err)
	}
	relative := webhook.Twilio(func(r *http.Request) string { return r.URL.RequestURI() })
	if err := verifyAt(relative, twilioURL, h, twilioForm, []string{twilioToken}, time.Time{}); !errors.Is(err, webhook.ErrSignature) {
		t.Errorf("a relative public URL: %v, want ErrSignature", err)
	}
}

// TestTwilioHandler: the handler verifies Twilio through VerifyRequest,
// also when Deferring wraps it, and answers the request, and its
// redelivery, 200 with the empty TwiML document as text/xml (text/plain
// would be texted back to the sender); a wrapper that hides
// VerifyRequest is refused (its Verify has no URL).
func TestTwilioHandler(t *testing.T) {
	t.Parallel()
	type hidden struct{ webhook.Provider }
	p := webhook.Twilio(func(r *http.Request) string {
		return "https://mycompany.com/myapp.php?" + r.URL.RawQuery
	})
	for _, tt := range []struct {
		name string
		p    webhook.Provider
		want int
	}{
		{"Twilio", p, http.StatusOK},
		{"Deferring(Twilio)", webhook.Deferring(p), http.StatusOK},
		{"hidden", hidden{p}, http.StatusUnauthorized},
	} {
		h, done := exampleHandler(tt.p, twilioToken, time.Time{})
		for _, what := range []string{"delivery", "redelivery"} {
			r := httptest.NewRequest(http.MethodPost, "/hooks/acme?foo=1&bar=2",
				strings.NewReader(twilioForm))
			r.Header = hdr("X-Twilio-Signature", twilioSignature,
				"I-Twilio-Idempotency-Token", twilioEventID)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tt.want {
				t.Errorf("%s %s: %d, want %d", tt.name, what, w.Code, tt.want)
			}
			if tt.want == http.StatusOK && (w.Header().Get("Content-Type") != "text/xml" ||
				w.Body.String() != `<?xml version="1.0" encoding="UTF-8"?><Response></Response>`) {
				t.Errorf("%s %s: %q %q, want the empty TwiML document as text/xml", tt.name, what,
					w.Header().Get("Content-Type"), w.Body.String())
			}
		}
		done()
	}
}

// Twilio's vector (twilio-python's tests), delivered through a proxy:
// Twilio called https://mycompany.com/myapp.php?foo=1&bar=2, the proxy
// forwards it to the handler's /hooks/acme with the query; publicURL says
// which URL Twilio signed.
func ExampleTwilio() {
	p := webhook.Twilio(func(r *http.Request) string {
		return "https://mycompany.com/myapp.php?" + r.URL.RawQuery
	})
	h, done := exampleHandler(p, twilioToken, time.Time{})
	defer done()
	for _, what := range []string{"delivery", "redelivery"} {
		r := httptest.NewRequest(http.MethodPost, "/hooks/acme?foo=1&bar=2",
			strings.NewReader(twilioForm))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		r.Header.Set("X-Twilio-Signature", twilioSignature)
		r.Header.Set("I-Twilio-Idempotency-Token", twilioEventID)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Printf("%s: %d, RateLimit: %s\n", what, w.Code, w.Header().Get("RateLimit"))
	}
	// Output:
	// stored twilio event fd0a6f5e-2a57-4e4d-9a8a-2c0d3e0f8b61 of acme (97 bytes)
	// delivery: 200, RateLimit: "hooks";r=199;t=36
	// redelivery: 200, RateLimit: "hooks";r=199;t=36
}
