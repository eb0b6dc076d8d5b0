package webhook

import (
	"crypto/sha256"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Slack returns the provider of the requests Slack signs — the Events API's
// events, slash commands, interactions (docs.slack.dev, "Verifying requests
// from Slack"): X-Slack-Signature is "v0=" and the hex HMAC-SHA256, under
// the app's signing secret (used as it is), of "v0:TIMESTAMP:BODY",
// TIMESTAMP being X-Slack-Request-Timestamp (Unix seconds). A timestamp
// further than tolerance from now is refused; a tolerance of 0 or less
// means DefaultTolerance, Slack's 5 minutes. The signature is read as
// Slack's SDK compares it (python-slack-sdk, slack_sdk/signature): the
// string "v0=" and 64 lower-case hex digits.
//
// The event id is the Events API body's event_id (Ev…), which Slack's
// retries repeat. A form body, which Slack never retries — a slash
// command, or an interaction's payload=JSON — is named by its trigger_id,
// one per invocation, so that a replay within the tolerance is a
// Duplicate. Slack's url_verification handshake, signed too, is answered
// with its challenge (Handshaker), charging and claiming nothing.
//
// Slack retries an event not answered 2xx within 3 seconds, 3 times: at
// once, a minute later and 5 minutes later (X-Slack-Retry-Num). Retries is
// true, so an event over the tenant's limit is answered 429; a tenant
// limited past Slack's last retry loses it (Deferring accepts it,
// deferred, instead). A retry that arrives while the first delivery is
// still with the Sink is answered 409 (Pending).
func Slack(tolerance time.Duration) Provider { return slack{tolerance: orDefault(tolerance)} }

type slack struct{ tolerance time.Duration }

func (slack) Name() string  { return "slack" }
func (slack) Retries() bool { return true }

func (p slack) Verify(h http.Header, body []byte, secrets []string, now time.Time) error {
	ts, v := h.Get("X-Slack-Request-Timestamp"), h.Get("X-Slack-Signature")
	if ts == "" || v == "" {
		return sigErr("slack", "no X-Slack-Request-Timestamp or X-Slack-Signature")
	}
	t, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return sigErr("slack", "X-Slack-Request-Timestamp is not Unix seconds")
	}
	hexSig, ok := strings.CutPrefix(v, "v0=")
	sig, isHex := lowerHexSig(hexSig, sha256.Size)
	if !ok || !isHex {
		return sigErr("slack", "X-Slack-Signature is not v0= and 64 lower-case hex digits")
	}
	if !within(t, now, p.tolerance) {
		return sigErr("slack", "timestamp outside the tolerance of "+p.tolerance.String())
	}
	return verifyHMAC("slack", "X-Slack-Signature", secrets, raw, [][]byte{sig},
		[]byte("v0:"+ts+":"), body)
}

func (slack) EventID(_ http.Header, body []byte) (string, error) {
	var event struct {
		EventID string `json:"event_id"`
	}
	if err := json.Unmarshal(body, &event); err == nil {
		if event.EventID == "" {
			return "", noEventID("slack", "the JSON body has no event_id")
		}
		return event.EventID, nil
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return "", noEventID("slack", "the body is neither a JSON event nor a form")
	}
	if id := form.Get("trigger_id"); id != "" {
		return id, nil
	}
	var interaction struct {
		TriggerID string `json:"trigger_id"`
	}
	if json.Unmarshal([]byte(form.Get("payload")), &interaction) == nil &&
		interaction.TriggerID != "" {
		return interaction.TriggerID, nil
	}
	return "", noEventID("slack", "the form has no trigger_id")
}
