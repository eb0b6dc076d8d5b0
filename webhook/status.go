package webhook

import (
	"io"
	"net/http"
	"strconv"

	"github.com/fleetstore/fleetstore/headers"
)

// Outcome is what the handler did with a delivery: a row of the package
// doc's "Statuses" table, each answered with its own status. Every status
// the handler writes is written by Handler.reply from the table replies,
// and the package doc's table lists the same rows (TestStatusTable holds
// the two together). Delivery.Outcome reports it.
type Outcome uint8

// The outcomes of a delivery, in the order of the package doc's table.
const (
	noOutcome       Outcome = iota // no answer yet: the delivery goes on
	NotPost                        // 405: a method other than POST
	TooLarge                       // 413: a body over Config.MaxBody
	Unreadable                     // 400: reading the body failed
	UnknownTenant                  // 404: Config.Tenant failed, or ErrUnknownTenant
	Forged                         // 401: the signature does not verify
	SecretsUnusable                // 500: Config.Secrets failed, or a secret is unusable
	Handshake                      // 200: a sender's check of the endpoint (Handshaker)
	NoEvent                        // 400: the provider names no event id
	PlanInvalid                    // 500: Config.Plan returned a plan Plan.Check refuses
	Stored                         // 202 (or AcceptStatus): OK, stored, the claim committed
	OverQuota                      // 202 (or AcceptStatus): OK over a quota (QuotaDefer), stored
	SinkFailed                     // 503: OK, but the Sink failed: the claim released
	Duplicate                      // 200: already stored
	Pending                        // 409: another delivery is being stored
	RateLimited                    // 429: denied, new, a provider that retries: released
	Deferred                       // 202 (or AcceptStatus): denied, new, not Retries
	Dropped                        // 202 (or AcceptStatus): over a quota (QuotaDrop), new: not stored
	OverBurst                      // 413: ErrOverCapacity, a provider that retries
	Invalid                        // 400: ErrInvalid for the tenant or the event id
	Unclaimable                    // 500: ErrInvalid for the hook id or Node
	StoreOut                       // 503: ErrTimeout, ErrUnavailable, ErrClosed, cancelled
)

// String returns o's name in snake case ("rate_limited"), for logs and
// metric attributes.
func (o Outcome) String() string {
	if int(o) >= len(replies) || o == noOutcome {
		return "outcome(" + strconv.Itoa(int(o)) + ")"
	}
	return replies[o].name
}

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

// replies is the handler's one table from outcome to answer. name is
// Outcome.String; outcome is the row's name in the package doc's table;
// body is the text sent (a line); retry is the Retry-After the answer
// carries, whose seconds the body then ends with ("retry after 30
// seconds").
var replies = [...]struct {
	name    string
	outcome string
	status  int
	body    string
	retry   retryAfter
}{
	noOutcome:     {},
	NotPost:       {"not_post", "not a POST", 405, "webhooks are POSTed", retryNone},
	TooLarge:      {"too_large", "body over Config.MaxBody", 413, "body over", retryNone},
	Unreadable:    {"unreadable", "body unreadable", 400, "reading the body failed", retryNone},
	UnknownTenant: {"unknown_tenant", "unknown tenant", 404, "unknown tenant", retryNone},
	Forged:        {"forged", "signature fails", 401, "signature verification failed", retryNone},
	SecretsUnusable: {"secrets_unusable", "secrets unusable", 500, "cannot verify deliveries",
		retryNone},
	Handshake: {"handshake", "handshake", 200, "", retryNone},
	NoEvent:   {"no_event", "no event id", 400, "no event id", retryNone},
	PlanInvalid: {"plan_invalid", "Config.Plan invalid", 500, "cannot charge deliveries",
		retryNone},
	Stored:     {"stored", "OK, stored", 202, "accepted", retryNone},
	OverQuota:  {"over_quota", "OK over a quota, defer", 202, "accepted", retryNone},
	SinkFailed: {"sink_failed", "OK, the Sink failed", 503, "not stored: retry", retryConfig},
	Duplicate:  {"duplicate", "Duplicate", 200, "duplicate: already stored", retryNone},
	Pending: {"pending", "Pending", 409, "another delivery of this event is being stored: retry",
		retryClaim},
	RateLimited: {"rate_limited", "denied, new, Retries", 429, "rate limited: retry", retryDenied},
	Deferred:    {"deferred", "denied, new, not Retries", 202, "accepted", retryNone},
	Dropped:     {"dropped", "over a quota, drop, new", 202, "accepted", retryNone},
	OverBurst: {"over_burst", "ErrOverCapacity, Retries", 413, "body over the tenant's byte burst",
		retryNone},
	Invalid: {"invalid", "ErrInvalid: tenant, event id", 400,
		"invalid delivery (tenant or event id)", retryNone},
	Unclaimable: {"unclaimable", "ErrInvalid: hook id, Node", 500, "cannot claim deliveries",
		retryNone},
	StoreOut: {"store_out", "store out, closed, cancelled", 503, "store unavailable: retry",
		retryConfig},
}

// reply writes r: its status and body, with Retry-After when it is
// Config.RetryAfter's (a 503), Allow for a 405, and the size for a 413
// over MaxBody. A body with a Retry-After ends with its seconds. The fields of package headers, when due, are set before.
// A stored, deferred or dropped delivery is answered the provider's accept status
// (Accepter). A reply of the provider's own (a Handshake's, an Ack's) is
// own: its content type and body.
func (h *Handler) reply(w http.ResponseWriter, d *Delivery, r Outcome, own ...string) {
	d.Outcome = r
	a := &replies[r]
	body := a.body
	d.Status = a.status
	if r == Stored || r == OverQuota || r == Deferred || r == Dropped {
		d.Status = h.accepted
	}
	if len(own) == 2 {
		if own[0] != "" {
			w.Header().Set("Content-Type", own[0])
		}
		w.WriteHeader(d.Status)
		io.WriteString(w, own[1])
		return
	}
	if a.retry == retryConfig {
		w.Header().Set("Retry-After", strconv.FormatInt(headers.RetryAfterSeconds(h.cfg.RetryAfter), 10))
	}
	if ra := w.Header().Get("Retry-After"); a.retry != retryNone && ra != "" {
		body += " after " + ra + " second"
		if ra != "1" {
			body += "s"
		}
	}
	switch {
	case r == NotPost:
		w.Header().Set("Allow", http.MethodPost)
	case r == TooLarge:
		body += " " + strconv.FormatInt(h.cfg.MaxBody, 10) + " bytes"
	}
	if d.Status >= 400 {
		http.Error(w, body, d.Status)
		return
	}
	w.WriteHeader(d.Status)
	io.WriteString(w, body+"\n")
}
