package webhook

import (
	"io"
	"net/http"
	"strconv"

	"github.com/fleetstore/fleetstore/headers"
)

// reply is an answer the handler gives a delivery: a row of replies.
// Every status the handler writes is written by Handler.reply from that
// table, and the package doc's "Statuses" table lists the same rows
// (TestStatusTable holds the two together).
type reply uint8

const (
	replyNone          reply = iota // no answer yet: the delivery goes on
	replyNotPost                    // a method other than POST
	replyTooLarge                   // a body over Config.MaxBody
	replyUnreadable                 // reading the body failed
	replyUnknownTenant              // Config.Tenant failed, or ErrUnknownTenant
	replyBadSignature               // the signature does not verify
	replySecrets                    // Config.Secrets failed, or a secret is unusable
	replyNoEvent                    // the provider names no event id
	replyStored                     // OK: stored, the claim committed
	replySinkFailed                 // OK, but the Sink failed: the claim released
	replyDuplicate                  // Duplicate: already stored
	replyPending                    // Pending: another delivery is being stored
	replyLimited                    // denied, new, a provider that retries: released
	replyDeferred                   // denied, new, a provider that does not retry
	replyOverBurst                  // ErrOverCapacity, a provider that retries
	replyInvalid                    // ErrInvalid for the tenant or the event id
	replyUnclaimable                // ErrInvalid for the hook id or Node
	replyStoreOut                   // ErrTimeout, ErrUnavailable, ErrClosed, cancelled
)

// retryAfter says where a reply's Retry-After comes from.
type retryAfter uint8

const (
	retryNone   retryAfter = iota // none
	retryConfig                   // Config.RetryAfter, set by Handler.reply
	retryClaim                    // the claim's pending time left (package headers)
	retryDenied                   // the denied charges' longest wait (package headers)
)

// String returns the Retry-After column of the package doc's table.
func (r retryAfter) String() string {
	return [...]string{"", "Config.RetryAfter", "the claim's time left", "the denied charges'"}[r]
}

// replies is the handler's one table from outcome to answer. outcome is
// the row's name in the package doc's table; body is the text sent (a
// line); retry is the Retry-After the answer carries.
var replies = [...]struct {
	outcome string
	status  int
	body    string
	retry   retryAfter
}{
	replyNone:          {},
	replyNotPost:       {"not a POST", 405, "webhooks are POSTed", retryNone},
	replyTooLarge:      {"body over Config.MaxBody", 413, "body over", retryNone},
	replyUnreadable:    {"body unreadable", 400, "reading the body failed", retryNone},
	replyUnknownTenant: {"unknown tenant", 404, "unknown tenant", retryNone},
	replyBadSignature:  {"signature fails", 401, "signature verification failed", retryNone},
	replySecrets:       {"secrets unusable", 500, "cannot verify deliveries", retryNone},
	replyNoEvent:       {"no event id", 400, "no event id", retryNone},
	replyStored:        {"OK, stored", 202, "accepted", retryNone},
	replySinkFailed:    {"OK, the Sink failed", 503, "not stored: retry", retryConfig},
	replyDuplicate:     {"Duplicate", 200, "duplicate: already stored", retryNone},
	replyPending: {"Pending", 409, "another delivery of this event is being stored: retry",
		retryClaim},
	replyLimited: {"denied, new, Retries", 429, "rate limited: retry after Retry-After",
		retryDenied},
	replyDeferred:  {"denied, new, not Retries", 202, "accepted", retryNone},
	replyOverBurst: {"ErrOverCapacity, Retries", 413, "body over the tenant's byte burst", retryNone},
	replyInvalid: {"ErrInvalid: tenant, event id", 400, "invalid delivery (tenant or event id)",
		retryNone},
	replyUnclaimable: {"ErrInvalid: hook id, Node", 500, "cannot claim deliveries", retryNone},
	replyStoreOut:    {"store out, closed, cancelled", 503, "store unavailable: retry", retryConfig},
}

// reply writes r: its status and body, with Retry-After when it is
// Config.RetryAfter's (a 503), Allow for a 405, and the size for a 413
// over MaxBody. The fields of package headers, when due, are set before.
func (h *Handler) reply(w http.ResponseWriter, r reply) {
	a := &replies[r]
	body := a.body
	switch {
	case a.retry == retryConfig:
		w.Header().Set("Retry-After", strconv.FormatInt(headers.RetryAfterSeconds(h.cfg.RetryAfter), 10))
	case r == replyNotPost:
		w.Header().Set("Allow", http.MethodPost)
	case r == replyTooLarge:
		body += " " + strconv.FormatInt(h.cfg.MaxBody, 10) + " bytes"
	}
	if a.status >= 400 {
		http.Error(w, body, a.status)
		return
	}
	w.WriteHeader(a.status)
	io.WriteString(w, body+"\n")
}
