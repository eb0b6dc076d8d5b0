package webhook

import (
	"crypto/sha256"
	"net/http"
	"strings"
	"time"
)

// GitHub returns the provider of GitHub's webhooks
// (docs.github.com, "Validating webhook deliveries"): the body signed with
// HMAC-SHA256 under the webhook's secret, hex in X-Hub-Signature-256
// ("sha256=…"); the event id is the delivery's GUID, X-GitHub-Delivery,
// which a redelivery repeats.
//
// GitHub does not redeliver a failed delivery on its own (only by hand,
// or by its API): Retries is false, so a delivery over the tenant's limit,
// or with a body over its byte burst, is accepted and handed to the sink
// deferred rather than refused.
//
// The signature binds the body only, not the delivery id nor a time: a
// captured delivery verifies again under another id (the package doc's
// "Replay").
func GitHub() Provider { return github{} }

type github struct{}

func (github) Name() string  { return "github" }
func (github) Retries() bool { return false }

func (github) Verify(h http.Header, body []byte, secrets []string, _ time.Time) error {
	v := h.Get("X-Hub-Signature-256")
	if v == "" {
		return sigErr("github", "no X-Hub-Signature-256")
	}
	hexSig, ok := strings.CutPrefix(v, "sha256=")
	sig, isHex := lowerHexSig(hexSig, sha256.Size)
	if !ok || !isHex {
		return sigErr("github", "X-Hub-Signature-256 is not sha256= and 64 lower-case hex digits")
	}
	return verifyHMAC("github", "X-Hub-Signature-256", secrets, raw, [][]byte{sig}, body)
}

func (github) EventID(h http.Header, _ []byte) (string, error) {
	if id := h.Get("X-GitHub-Delivery"); id != "" {
		return id, nil
	}
	return "", noEventID("github", "no X-GitHub-Delivery")
}
