package webhook

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// paddleTolerance is Paddle's SDKs' tolerance: MAX_VALID_TIME_DIFFERENCE
// in paddle-node-sdk, Verifier's maximum_variance in paddle-python-sdk.
const paddleTolerance = 5 * time.Second

// Paddle returns the provider of Paddle Billing's webhooks
// (developer.paddle.com, "Verify webhook signatures"): Paddle-Signature is
// "ts=TIMESTAMP;h1=HEX", h1 the HMAC-SHA256 of "TIMESTAMP:BODY" under the
// notification destination's secret key (pdl_ntfset_…, used as it is). A
// timestamp further than tolerance from now is refused; a tolerance of 0
// or less means 5 seconds, what Paddle's SDKs apply (they refuse only a
// timestamp that old; this provider refuses one that far either way).
// The header is parsed as paddle-node-sdk and paddle-python-sdk parse
// it: pairs KEY=VALUE separated by ";", keys other than ts and h1 ignored,
// every h1 tried (there may be one per secret while Paddle rotates it),
// each 64 lower-case hex digits (both compare hex strings).
//
// The event id is the body's event_id (evt_…), on which Paddle's docs
// ("How webhooks work") say to dedupe: a redelivery repeats it, and so
// does the notification of one event to another destination (its
// notification_id differs).
//
// Paddle retries a notification not answered in 5 seconds — a live
// account's up to 60 times over 3 days, a sandbox's 3 times in 15
// minutes: Retries is true, so a delivery over the tenant's limit is
// answered 429 with Retry-After.
//
// A stored delivery is answered 200, not 202: Paddle's docs ("Handle
// webhook delivery") ask for 200 within five seconds.
func Paddle(tolerance time.Duration) Provider {
	if tolerance <= 0 {
		tolerance = paddleTolerance
	}
	return paddle{tolerance: tolerance}
}

type paddle struct{ tolerance time.Duration }

func (paddle) Name() string  { return "paddle" }
func (paddle) Retries() bool { return true }

// AcceptStatus implements Accepter: Paddle retries a delivery answered with
// anything but 200.
func (paddle) AcceptStatus() int { return http.StatusOK }

func (p paddle) Verify(h http.Header, body []byte, secrets []string, now time.Time) error {
	v := h.Get("Paddle-Signature")
	if v == "" {
		return sigErr("paddle", "no Paddle-Signature")
	}
	ts, sigs := timedSigs(v, ";", "ts", "h1")
	t, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return sigErr("paddle", "Paddle-Signature has no ts=TIMESTAMP")
	}
	if len(sigs) == 0 {
		return sigErr("paddle", "Paddle-Signature has no h1 of 64 lower-case hex digits")
	}
	if !within(t, now, p.tolerance) {
		return sigErr("paddle", "timestamp outside the tolerance of "+p.tolerance.String())
	}
	return verifyHMAC("paddle", "Paddle-Signature", secrets, raw, sigs, []byte(ts+":"), body)
}

func (paddle) EventID(_ http.Header, body []byte) (string, error) {
	var notification struct {
		EventID string `json:"event_id"`
	}
	if err := json.Unmarshal(body, &notification); err != nil {
		return "", noEventID("paddle", "the body is not a JSON notification")
	}
	if notification.EventID == "" {
		return "", noEventID("paddle", "the notification has no event_id")
	}
	return notification.EventID, nil
}
