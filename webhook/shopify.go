package webhook

import (
	"net/http"
	"time"
)

// Shopify returns the provider of Shopify's webhooks (shopify.dev,
// "Webhooks delivery structure", "Verify Events deliveries"): the body
// signed with HMAC-SHA256 under the app's client secret, base64 in
// X-Shopify-Hmac-Sha256, or Shopify-Hmac-Sha256 in the lower-case
// shopify-* headers Shopify also delivers; the event id is the delivery's
// webhook id, which a retry repeats: the key "Webhooks delivery structure"
// and the official libraries (@shopify/shopify-api, shopify_api) dedupe on
// (a delivery with Shopify-Hmac-Sha256 is read in that form only, as
// @shopify/shopify-api reads it). Not
// X-Shopify-Event-Id: the deliveries of one merchant action to several
// subscriptions share it, and all but the first would be answered
// Duplicate, and lost.
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

// shopifyForm returns the prefix of a delivery's header names: "Shopify-"
// when it carries Shopify-Hmac-Sha256, which takes precedence (as in
// @shopify/shopify-api's detectWebhookType and shopify-api-ruby), else
// "X-Shopify-".
func shopifyForm(h http.Header) string {
	if h.Get("Shopify-Hmac-Sha256") != "" {
		return "Shopify-"
	}
	return "X-Shopify-"
}

func (shopify) Verify(h http.Header, body []byte, secrets []string, _ time.Time) error {
	name := shopifyForm(h) + "Hmac-Sha256"
	v := h.Get(name)
	if v == "" {
		return sigErr("shopify", "no X-Shopify-Hmac-Sha256 or Shopify-Hmac-Sha256")
	}
	sig, ok := stdBase64(v)
	if !ok {
		return sigErr("shopify", name+" is not a base64 HMAC-SHA256")
	}
	return verifyHMAC("shopify", name, secrets, raw, [][]byte{sig}, body)
}

func (shopify) EventID(h http.Header, _ []byte) (string, error) {
	name := shopifyForm(h) + "Webhook-Id"
	if id := h.Get(name); id != "" {
		return id, nil
	}
	return "", noEventID("shopify", "no "+name)
}
