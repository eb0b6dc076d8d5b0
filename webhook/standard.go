package webhook

import (
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// StandardWebhooks returns the provider of the Standard Webhooks
// specification (standardwebhooks.com; github.com/standard-webhooks,
// spec/standard-webhooks.md), as Svix, Resend, Clerk and others send
// them. The headers are webhook-id, webhook-timestamp in Unix seconds,
// and webhook-signature, a space-separated list of "v1,BASE64". Each is
// the HMAC-SHA256 of "ID.TIMESTAMP.BODY" under a secret "whsec_BASE64":
// the key is the decoded base64, with or without its = padding. A
// timestamp further than tolerance from now is refused; a tolerance of 0
// or less means DefaultTolerance. The event id is webhook-id, which every
// attempt of one message repeats. Svix's own header names (svix-id,
// svix-timestamp, svix-signature) are read when the webhook-* ones are
// absent.
//
// Senders of the specification retry a delivery not answered 2xx on a
// schedule (Svix: over about a day and a half): Retries is true, so a
// delivery over the tenant's limit is answered 429 with Retry-After.
func StandardWebhooks(tolerance time.Duration) Provider {
	return standard{name: "standard-webhooks", tolerance: orDefault(tolerance)}
}

// Svix is StandardWebhooks under the name "svix": the claims of its
// deliveries are scoped to source "svix".
func Svix(tolerance time.Duration) Provider {
	return standard{name: "svix", tolerance: orDefault(tolerance)}
}

// whsec is a Standard Webhooks secret's key: the standard base64 after
// whsec_, with its = padding or without it. The reference Python library
// pads the secret before decoding it
// (libraries/python/standardwebhooks/webhooks.py), and the npm packages
// standardwebhooks and svix decode it without padding: all give the same
// key. A padding partly left out is refused, as the reference Go library
// refuses it; that library refuses an unpadded secret too.
func whsec(s string) ([]byte, bool) {
	b64 := strings.TrimPrefix(s, "whsec_")
	enc := base64.StdEncoding
	if !strings.HasSuffix(b64, "=") {
		enc = base64.RawStdEncoding
	}
	key, err := enc.DecodeString(b64)
	return key, err == nil
}

// orDefault is a tolerance of 0 or less as DefaultTolerance.
func orDefault(tolerance time.Duration) time.Duration {
	if tolerance <= 0 {
		return DefaultTolerance
	}
	return tolerance
}

type standard struct {
	name      string
	tolerance time.Duration
}

func (p standard) Name() string { return p.name }
func (standard) Retries() bool  { return true }

// field reads the webhook-NAME header, else svix-NAME.
func field(h http.Header, name string) string {
	if v := h.Get("webhook-" + name); v != "" {
		return v
	}
	return h.Get("svix-" + name)
}

func (p standard) Verify(h http.Header, body []byte, secrets []string, now time.Time) error {
	id, ts, list := field(h, "id"), field(h, "timestamp"), field(h, "signature")
	if id == "" || ts == "" || list == "" {
		return sigErr(p.name, "no webhook-id, webhook-timestamp or webhook-signature")
	}
	t, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return sigErr(p.name, "webhook-timestamp is not Unix seconds")
	}
	if !within(t, now, p.tolerance) {
		return sigErr(p.name, "timestamp outside the tolerance of "+p.tolerance.String())
	}
	var sigs [][]byte
	for _, s := range strings.Split(list, " ") {
		f := strings.Split(s, ",") // "v1", the signature, and what a second comma adds, ignored
		if len(f) < 2 || f[0] != "v1" {
			continue // another scheme (v1a: asymmetric) or noise
		}
		if sig, ok := stdBase64(f[1]); ok {
			sigs = append(sigs, sig)
		}
	}
	if len(sigs) == 0 {
		return sigErr(p.name, "webhook-signature has no v1 signature")
	}
	signed := []byte(strconv.FormatInt(t, 10)) // as the reference libraries sign it
	return verifyHMAC(p.name, "webhook-signature", secrets, whsec, sigs,
		[]byte(id), []byte{'.'}, signed, []byte{'.'}, body)
}

// stdBase64 decodes s, an HMAC-SHA256 in base64 as Shopify and Standard
// Webhooks senders send it: the padded standard encoding of its 32 bytes,
// the one spelling the official verifiers (@shopify/shopify-api, the
// reference libraries) accept, as they compare base64 strings;
// base64.StdEncoding alone would take other trailing bits and skip CR
// and LF.
func stdBase64(s string) ([]byte, bool) {
	sig, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(sig) != sha256.Size || base64.StdEncoding.EncodeToString(sig) != s {
		return nil, false
	}
	return sig, true
}

func (p standard) EventID(h http.Header, _ []byte) (string, error) {
	if id := field(h, "id"); id != "" {
		return id, nil
	}
	return "", noEventID(p.name, "no webhook-id")
}
