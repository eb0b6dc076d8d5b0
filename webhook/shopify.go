package webhook

import (
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"time"
)

// Shopify returns the provider of Shopify's webhooks (shopify.dev,
// "Deliver webhooks through HTTPS", "Verify a webhook"): the body signed
// with HMAC-SHA256 under the app's client secret, base64 in
// X-Shopify-Hmac-Sha256; the event id is X-Shopify-Event-Id, which every
// delivery of one event repeats, else X-Shopify-Webhook-Id.
//
// Shopify retries a delivery not answered 2xx within 5 seconds, 8 times
// over 4 hours, and may then remove the subscription: Retries is true, so
// a delivery over the tenant's limit is answered 429 with Retry-After. A
// tenant limited for hours loses its subscription; give Shopify a limit
// it cannot hold that long, or wrap the provider to defer (Deferring).
//
// The signature binds the body only, not the event id nor a time: a
// captured delivery verifies again under another id (the package doc's
// "Replay").
func Shopify() Provider { return shopify{} }

type shopify struct{}

func (shopify) Name() string  { return "shopify" }
func (shopify) Retries() bool { return true }

func (shopify) Verify(h http.Header, body []byte, secrets []string, _ time.Time) error {
	v := h.Get("X-Shopify-Hmac-Sha256")
	if v == "" {
		return sigErr("shopify", "no X-Shopify-Hmac-Sha256")
	}
	sig, err := base64.StdEncoding.DecodeString(v)
	if err != nil || len(sig) != sha256.Size {
		return sigErr("shopify", "X-Shopify-Hmac-Sha256 is not a base64 HMAC-SHA256")
	}
	return verifyHMAC("shopify", "X-Shopify-Hmac-Sha256", secrets, raw, [][]byte{sig}, body)
}

func (shopify) EventID(h http.Header, _ []byte) (string, error) {
	if id := h.Get("X-Shopify-Event-Id"); id != "" {
		return id, nil
	}
	if id := h.Get("X-Shopify-Webhook-Id"); id != "" {
		return id, nil
	}
	return "", noEventID("shopify", "no X-Shopify-Event-Id or X-Shopify-Webhook-Id")
}
