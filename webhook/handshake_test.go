package webhook_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/webhook"
)

// TestHandshake: a signed Discord PING and a signed Slack url_verification
// are answered as their senders require, 200, charging and claiming
// nothing; a forged one is 401; a real delivery after them still has the
// tenant's one-hook burst.
func TestHandshake(t *testing.T) {
	const slackSecret = "8f742231b10e8888abcd99yyyzzz85a5"
	slackAt := time.Unix(1700000000, 0)
	slackSign := func(body string) http.Header {
		ts := strconv.FormatInt(slackAt.Unix(), 10)
		m := hmac.New(sha256.New, []byte(slackSecret))
		m.Write([]byte("v0:" + ts + ":" + body))
		return http.Header{"X-Slack-Request-Timestamp": {ts},
			"X-Slack-Signature": {"v0=" + hex.EncodeToString(m.Sum(nil))}}
	}
	// Slack's docs' url_verification request (docs.slack.dev, "The
	// url_verification event").
	const challenge = "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"
	urlVerification := `{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"` + challenge +
		`","type":"url_verification"}`
	slackEvent := `{"type":"event_callback","event_id":"Ev0PV52K21","event":{"type":"app_mention"}}`
	discordAt := time.Unix(1700000000, 0).Add(2 * time.Second)
	discordHeader := func(sig string) http.Header {
		return http.Header{"X-Signature-Timestamp": {discordTimestamp}, "X-Signature-Ed25519": {sig}}
	}
	for _, c := range []struct {
		p                 webhook.Provider
		secret            string
		now               time.Time
		shake             http.Header
		shakeBody         string
		forged            http.Header
		event             http.Header
		eventBody         string
		wantType, wantOut string
		stored            int    // the status of the event, once stored
		storedOut         string // its body, when not the table's
	}{
		{webhook.Slack(0), slackSecret, slackAt, slackSign(urlVerification), urlVerification,
			slackSign(urlVerification + " "), slackSign(slackEvent), slackEvent, "text/plain", challenge,
			http.StatusAccepted, ""},
		{webhook.Deferring(webhook.Discord(0)), discordPublicKey, discordAt, discordHeader(discordPingSig),
			discordPing, discordHeader(discordCommandSig), discordHeader(discordCommandSig), discordCommand,
			"application/json", `{"type":1}`, http.StatusOK, `{"type":5}`},
	} {
		t.Run(c.p.Name(), func(t *testing.T) {
			store := openMemory(t)
			one := fleetstore.MustLimit(fleetstore.NewLimit(fleetstore.Hooks, 1, time.Hour, 1))
			var outcomes []webhook.Outcome
			h, err := webhook.New(webhook.Config{
				Store: store, Provider: c.p, Limits: fleetstore.Plan{one},
				Secrets: func(string) ([]string, error) { return []string{c.secret}, nil },
				Tenant:  func(*http.Request, []byte) (string, error) { return "acme", nil },
				Sink:    webhook.SinkFunc(func(context.Context, *webhook.Hook) error { return nil }),
				Now:     func() time.Time { return c.now },
				OnDelivery: func(d *webhook.Delivery) {
					outcomes = append(outcomes, d.Outcome)
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			send := func(hd http.Header, body string) *httptest.ResponseRecorder {
				r := httptest.NewRequest(http.MethodPost, "/hooks/acme", strings.NewReader(body))
				r.Header = hd.Clone()
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				return w
			}
			for range 2 {
				w := send(c.shake, c.shakeBody)
				if w.Code != 200 || w.Header().Get("Content-Type") != c.wantType ||
					w.Body.String() != c.wantOut || w.Header().Get("RateLimit") != "" {
					t.Fatalf("handshake: %d %q %q, RateLimit %q; want 200 %q %q, no RateLimit",
						w.Code, w.Header().Get("Content-Type"), w.Body.String(),
						w.Header().Get("RateLimit"), c.wantType, c.wantOut)
				}
			}
			if w := send(c.forged, c.shakeBody); w.Code != http.StatusUnauthorized {
				t.Errorf("a forged handshake: %d, want 401", w.Code)
			}
			w := send(c.event, c.eventBody)
			if w.Code != c.stored || c.storedOut != "" && w.Body.String() != c.storedOut {
				t.Errorf("the event after two handshakes: %d %q, want %d %q (nothing charged before)",
					w.Code, w.Body.String(), c.stored, c.storedOut)
			}
			want := []webhook.Outcome{webhook.Handshake, webhook.Handshake, webhook.Forged, webhook.Stored}
			if len(outcomes) != len(want) || outcomes[0] != want[0] || outcomes[1] != want[1] ||
				outcomes[2] != want[2] || outcomes[3] != want[3] {
				t.Errorf("outcomes %v, want %v", outcomes, want)
			}
		})
	}
}

// TestDiscordAckBeforeSink: a stored interaction's answer is the deferred
// interaction response as application/json even when the Sink overwrites
// the body it was handed (it may keep and reuse it): the handler reads
// the interaction's type before the Sink has it.
func TestDiscordAckBeforeSink(t *testing.T) {
	t.Parallel()
	h, err := webhook.New(webhook.Config{
		Store: openMemory(t), Provider: webhook.Discord(0),
		Secrets: func(string) ([]string, error) { return []string{discordPublicKey}, nil },
		Tenant:  func(*http.Request, []byte) (string, error) { return "acme", nil },
		Sink: webhook.SinkFunc(func(_ context.Context, h *webhook.Hook) error {
			clear(h.Body)
			return nil
		}),
		Now: func() time.Time { return time.Unix(1700000000, 0).Add(2 * time.Second) },
	})
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(discordCommand))
	r.Header = http.Header{"X-Signature-Timestamp": {discordTimestamp},
		"X-Signature-Ed25519": {discordCommandSig}}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusOK || w.Header().Get("Content-Type") != "application/json" ||
		w.Body.String() != `{"type":5}` {
		t.Errorf("a stored command: %d %q %q, want 200 application/json {\"type\":5}", w.Code,
			w.Header().Get("Content-Type"), w.Body.String())
	}
}
