package webhook_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore/webhook"
)

// Slack's published vector: Slack's docs' example, "Verifying requests
// from Slack" (https://docs.slack.dev/authentication/verifying-requests-from-slack/),
// as the official python-slack-sdk tests it
// (github.com/slackapi/python-slack-sdk
// tests/slack_sdk/signature/test_signature_verifier.py): a slash
// command's form body, signed at 1531420618 under the signing secret
// below.
const (
	slackSecret    = "8f742231b10e8888abcd99yyyzzz85a5"
	slackTimestamp = "1531420618"
	slackSignature = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"
	slackBody      = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
	slackTrigger   = "398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
)

var slackSigned = signed{
	p: webhook.Slack(0),
	header: hdr("X-Slack-Request-Timestamp", slackTimestamp,
		"X-Slack-Signature", slackSignature),
	body:    slackBody,
	secret:  slackSecret,
	other:   "another signing secret",
	now:     time.Unix(1531420618, 0).Add(time.Minute),
	eventID: slackTrigger,
}

// TestSlack: Slack's vector verifies; tampering, another secret and every
// malformed header are refused; the timestamp is held to the tolerance.
func TestSlack(t *testing.T) {
	t.Parallel()
	s := slackSigned
	s.check(t, slackSignature[3:])
	s.malformed(t, slackSignature[3:], map[string]http.Header{
		"no signature":   clone(s.header, "X-Slack-Signature", ""),
		"no timestamp":   clone(s.header, "X-Slack-Request-Timestamp", ""),
		"bad timestamp":  clone(s.header, "X-Slack-Request-Timestamp", "soon"),
		"other ts":       clone(s.header, "X-Slack-Request-Timestamp", "1531420619"),
		"v1 prefix":      clone(s.header, "X-Slack-Signature", "v1="+slackSignature[3:]),
		"no prefix":      clone(s.header, "X-Slack-Signature", slackSignature[3:]),
		"upper-case hex": clone(s.header, "X-Slack-Signature", "v0="+strings.ToUpper(slackSignature[3:])),
		"short":          clone(s.header, "X-Slack-Signature", slackSignature[:60]),
		"not hex":        clone(s.header, "X-Slack-Signature", "v0="+strings.Repeat("z", 64)),
	})
	s.tolerance(t, webhook.Slack, time.Unix(1531420618, 0), 5*time.Minute)
	if !webhook.Slack(0).Retries() {
		t.Error("Slack retries an event not answered 2xx")
	}
}

// TestSlackEventIDs: an Events API event is named by its event_id, a
// slash command by its trigger_id, an interaction by its payload's
// trigger_id; the url_verification handshake and a form with neither
// have none.
func TestSlackEventIDs(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		body string
		want string // "": ErrNoEventID
	}{
		{`{"token":"z","team_id":"T1","type":"event_callback","event_id":"Ev08MFMKH6","event":{"type":"app_mention"}}`, "Ev08MFMKH6"},
		{`{"token":"z","challenge":"3eZbrw1aB","type":"url_verification"}`, ""},
		{`{"event_id": 5}`, ""},
		{slackBody, slackTrigger},
		{"payload=%7B%22type%22%3A%22block_actions%22%2C%22trigger_id%22%3A%2213345224609.738474920.8088930838d88f008e0%22%7D", "13345224609.738474920.8088930838d88f008e0"},
		{"payload=%7Bnot+json", ""},
		{"command=%2Fweather&text=94070", ""},
		{"trigger_id=%zz", ""},
	} {
		id, err := webhook.Slack(0).EventID(nil, []byte(tt.body))
		if tt.want == "" && !errors.Is(err, webhook.ErrNoEventID) ||
			tt.want != "" && (err != nil || id != tt.want) {
			t.Errorf("%.40q: %q, %v; want %q", tt.body, id, err, tt.want)
		}
	}
}

// Slack's docs' signed slash command (python-slack-sdk's test vector),
// received a minute after it was signed: named by its trigger_id.
func ExampleSlack() {
	h, done := exampleHandler(webhook.Slack(0), slackSecret, time.Unix(1531420618+60, 0))
	defer done()
	deliver(h, http.Header{
		"Content-Type":              {"application/x-www-form-urlencoded"},
		"X-Slack-Request-Timestamp": {slackTimestamp},
		"X-Slack-Signature":         {slackSignature},
	}, slackBody)
	// Output:
	// stored slack event 398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c of acme (362 bytes)
	// delivery: 202, RateLimit: "hooks";r=199;t=36
	// redelivery: 200, RateLimit: "hooks";r=199;t=36
}
