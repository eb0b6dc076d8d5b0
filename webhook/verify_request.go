package webhook

import (
	"net/http"
	"time"
)

// RequestVerifier is a Provider whose signature covers more of the request
// than its header and body: Twilio's covers the URL it called. For one, the
// handler calls VerifyRequest instead of Verify, with the request as
// received and its body as read; its errors are those of Verify
// (ErrSignature, ErrSecret). Deferring keeps it; a wrapper of one's own
// must implement it too, or the handler calls Verify.
type RequestVerifier interface {
	Provider
	VerifyRequest(r *http.Request, body []byte, secrets []string, now time.Time) error
}

// verifyDelivery is p's check of a delivery: VerifyRequest for a
// RequestVerifier (Deferring's too), else Verify.
func verifyDelivery(p Provider, r *http.Request, body []byte, secrets []string,
	now time.Time) error {
	if rv, ok := inner(p).(RequestVerifier); ok {
		return rv.VerifyRequest(r, body, secrets, now)
	}
	return p.Verify(r.Header, body, secrets, now)
}
