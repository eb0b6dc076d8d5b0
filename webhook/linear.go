package webhook

import (
	"crypto/sha256"
	"encoding/json"
	"net/http"
	"time"
)

// linearTolerance is Linear's SDK's tolerance (@linear/sdk,
// LinearWebhookClient.verify).
const linearTolerance = time.Minute

// Linear returns the provider of Linear's webhooks (linear.app/developers,
// "Webhooks"): Linear-Signature is the hex HMAC-SHA256 of the body under
// the webhook's signing secret (used as it is), read as Linear's SDK
// compares it: 64 lower-case hex digits. The signature binds no header,
// but the body's webhookTimestamp (Unix milliseconds) is signed with it: a
// delivery whose webhookTimestamp is further than tolerance from now is
// refused, a tolerance of 0 or less meaning one minute, the SDK's. The SDK
// lets through a body without webhookTimestamp (then trusting the unsigned
// Linear-Timestamp header, or nothing); this provider refuses it, so that
// no signature is good for ever.
//
// The event id is Linear-Delivery, the delivery's UUID; Linear's docs do
// not say whether a retry repeats it. It is not signed: a delivery
// captured and replayed within the tolerance under another Linear-Delivery
// is a new event (the package doc's "Replay"). The body's webhookId is the
// webhook's, the same for all its events.
//
// Linear retries a delivery not answered 200 within 5 seconds, 3 times:
// after a minute, an hour and 6 hours. Retries is true, so a delivery over
// the tenant's limit is answered 429 with Retry-After.
//
// A stored delivery is therefore answered 200, not 202 (AcceptStatus).
func Linear(tolerance time.Duration) Provider {
	if tolerance <= 0 {
		tolerance = linearTolerance
	}
	return linear{tolerance: tolerance}
}

type linear struct{ tolerance time.Duration }

func (linear) Name() string  { return "linear" }
func (linear) Retries() bool { return true }

// AcceptStatus implements Accepter: Linear retries a delivery answered with
// anything but 200.
func (linear) AcceptStatus() int { return http.StatusOK }

func (p linear) Verify(h http.Header, body []byte, secrets []string, now time.Time) error {
	v := h.Get("Linear-Signature")
	if v == "" {
		return sigErr("linear", "no Linear-Signature")
	}
	sig, ok := lowerHexSig(v, sha256.Size)
	if !ok {
		return sigErr("linear", "Linear-Signature is not 64 lower-case hex digits")
	}
	if err := verifyHMAC("linear", "Linear-Signature", secrets, raw, [][]byte{sig},
		body); err != nil {
		return err
	}
	// The timestamp is in the body: read only once the body is the sender's.
	var payload struct {
		WebhookTimestamp int64 `json:"webhookTimestamp"`
	}
	if json.Unmarshal(body, &payload) != nil || payload.WebhookTimestamp <= 0 {
		return sigErr("linear", "the body has no webhookTimestamp (Unix milliseconds)")
	}
	d := now.Sub(time.UnixMilli(payload.WebhookTimestamp))
	if d > p.tolerance || d < -p.tolerance {
		return sigErr("linear", "webhookTimestamp outside the tolerance of "+p.tolerance.String())
	}
	return nil
}

func (linear) EventID(h http.Header, _ []byte) (string, error) {
	if id := h.Get("Linear-Delivery"); id != "" {
		return id, nil
	}
	return "", noEventID("linear", "no Linear-Delivery")
}
