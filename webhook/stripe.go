package webhook

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// DefaultTolerance is how far a signed timestamp may be from the time of
// receipt, either way, for Stripe and Standard Webhooks: 5 minutes, what
// both document.
const DefaultTolerance = 5 * time.Minute

// Stripe returns the provider of Stripe's webhooks (docs.stripe.com,
// "Verify webhook signatures manually"): Stripe-Signature holds
// t=TIMESTAMP and one v1=HEX per signing secret in use, each the
// HMAC-SHA256 of "TIMESTAMP.BODY" under an endpoint secret (whsec_…, used
// as it is); a timestamp further than tolerance from now is refused (a
// replay); a tolerance of 0 or less means DefaultTolerance (there is no
// "no tolerance": a signature is never good for ever). The event id is the body's "id"
// (evt_…), which a retry repeats.
//
// Stripe retries a delivery not answered 2xx for up to 3 days, backing
// off: Retries is true, so a delivery over the tenant's limit is answered
// 429 with Retry-After.
func Stripe(tolerance time.Duration) Provider {
	return stripe{tolerance: orDefault(tolerance)}
}

type stripe struct{ tolerance time.Duration }

func (stripe) Name() string  { return "stripe" }
func (stripe) Retries() bool { return true }

func (p stripe) Verify(h http.Header, body []byte, secrets []string, now time.Time) error {
	v := h.Get("Stripe-Signature")
	if v == "" {
		return sigErr("stripe", "no Stripe-Signature")
	}
	ts, sigs := timedSigs(v, ",", "t", "v1")
	t, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return sigErr("stripe", "Stripe-Signature has no t=TIMESTAMP")
	}
	if len(sigs) == 0 {
		return sigErr("stripe", "Stripe-Signature has no v1 signature")
	}
	if !within(t, now, p.tolerance) {
		return sigErr("stripe", "timestamp outside the tolerance of "+p.tolerance.String())
	}
	signed := []byte(strconv.FormatInt(t, 10)) // the timestamp as stripe-node and stripe-go sign it
	return verifyHMAC("stripe", "Stripe-Signature", secrets, raw, sigs, signed, []byte{'.'}, body)
}

func (stripe) EventID(_ http.Header, body []byte) (string, error) {
	var ev struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(body, &ev); err != nil {
		return "", noEventID("stripe", "the body is not a JSON event")
	}
	if ev.ID == "" {
		return "", noEventID("stripe", "the event has no id")
	}
	return ev.ID, nil
}
