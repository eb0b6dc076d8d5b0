package webhook_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore/webhook"
)

// signed is one delivery a provider's published vector signs, as the tests
// of slack.go, twilio.go, discord.go, paddle.go and linear.go check it.
type signed struct {
	p      webhook.Provider
	target string // the request's URL; Twilio's signature covers it
	header http.Header
	body   string
	secret string
	// other is a secret of the provider's form that did not sign the
	// vector (for Discord, another public key).
	other   string
	now     time.Time
	eventID string // "": the vector has none
}

// verify checks body with header as p does in the handler: VerifyRequest
// for a RequestVerifier, else Verify.
func (s signed) verify(header http.Header, body string, secrets ...string) error {
	return verifyAt(s.p, s.target, header, body, secrets, s.now)
}

func verifyAt(p webhook.Provider, target string, header http.Header, body string,
	secrets []string, now time.Time) error {
	if rv, ok := p.(webhook.RequestVerifier); ok {
		if target == "" {
			target = "/hooks/acme"
		}
		r := httptest.NewRequest(http.MethodPost, target, strings.NewReader(body))
		r.Header = header
		return rv.VerifyRequest(r, []byte(body), secrets, now)
	}
	return p.Verify(header, []byte(body), secrets, now)
}

// check: the vector verifies, also as the second of two secrets
// (rotation); a body changed by a bit, a byte more or less, or emptied,
// another secret and no secret are ErrSignature; an empty secret is
// ErrSecret; the event id is the vector's; no error quotes the secret,
// the signature or the body.
func (s signed) check(t *testing.T, signature string) {
	t.Helper()
	if err := s.verify(s.header, s.body, s.secret); err != nil {
		t.Fatalf("the vector: %v", err)
	}
	if err := s.verify(s.header, s.body, s.other, s.secret); err != nil {
		t.Errorf("the secret second of two (rotation): %v", err)
	}
	for name, body := range map[string]string{
		"one bit flipped":  flip(s.body),
		"one more byte":    s.body + " ",
		"truncated by one": s.body[:len(s.body)-1],
		"empty body":       "",
	} {
		err := s.verify(s.header, body, s.secret)
		s.refused(t, name, err, signature)
	}
	s.refused(t, "another secret", s.verify(s.header, s.body, s.other), signature)
	s.refused(t, "no secret", s.verify(s.header, s.body), signature)
	if err := s.verify(s.header, s.body, s.secret, ""); !errors.Is(err, webhook.ErrSecret) ||
		errors.Is(err, webhook.ErrSignature) {
		t.Errorf("an empty secret: %v, want ErrSecret", err)
	}
	id, err := s.p.EventID(s.header, []byte(s.body))
	switch {
	case s.eventID == "" && !errors.Is(err, webhook.ErrNoEventID):
		t.Errorf("EventID = %q, %v; want ErrNoEventID", id, err)
	case s.eventID != "" && (err != nil || id != s.eventID):
		t.Errorf("EventID = %q, %v; want %q", id, err, s.eventID)
	}
}

// refused: err is ErrSignature and quotes neither the secret, the
// signature nor the body.
func (s signed) refused(t *testing.T, name string, err error, signature string) {
	t.Helper()
	if !errors.Is(err, webhook.ErrSignature) {
		t.Errorf("%s: %v, want ErrSignature", name, err)
		return
	}
	for _, quoted := range []string{s.secret, signature[:12], s.body[:12]} {
		if strings.Contains(err.Error(), quoted) {
			t.Errorf("%s: the error %q quotes a secret, a signature or the body", name, err)
		}
	}
}

// malformed: each header of cases is ErrSignature with the vector's body
// and secret.
func (s signed) malformed(t *testing.T, signature string, cases map[string]http.Header) {
	t.Helper()
	for name, h := range cases {
		s.refused(t, name, s.verify(h, s.body, s.secret), signature)
	}
}

// tolerance: the vector signed at signedAt is refused received further
// than tolerance from it, either way, and verifies within it; p makes the
// provider of a tolerance (0: its default, want).
func (s signed) tolerance(t *testing.T, p func(time.Duration) webhook.Provider,
	signedAt time.Time, want time.Duration) {
	t.Helper()
	for _, tt := range []struct {
		tolerance time.Duration
		received  time.Duration // after signedAt
		ok        bool
	}{
		{0, want, true},
		{0, -want, true},
		{0, want + time.Millisecond, false},
		{0, -want - time.Millisecond, false},
		{0, 24 * time.Hour, false},
		{-time.Second, want, true},
		{time.Hour, 59 * time.Minute, true},
		{time.Hour, -61 * time.Minute, false},
	} {
		err := verifyAt(p(tt.tolerance), s.target, s.header, s.body, []string{s.secret},
			signedAt.Add(tt.received))
		if tt.ok && err != nil || !tt.ok && !errors.Is(err, webhook.ErrSignature) {
			t.Errorf("tolerance %v, received %v after signing: %v, want ok %v",
				tt.tolerance, tt.received, err, tt.ok)
		}
	}
}
