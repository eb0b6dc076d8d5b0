package webhook

import (
	"context"
	"net/http"
	"time"

	"github.com/fleetstore/fleetstore"
)

// Hook is a verified delivery, as the handler hands it to the Sink.
type Hook struct {
	// ID is this delivery's hook id, fresh for each request: the fencing
	// token of its claim (fleetstore.Claim.HookID).
	ID string
	// Tenant, Source and EventID are the claim's scope and key: the
	// tenant, the provider's name and its event id.
	Tenant, Source, EventID string
	// Header is the request's header; Body its body, verified.
	Header http.Header
	Body   []byte
	// Received is when the request arrived (the handler's clock).
	Received time.Time
	// Deferred is set on a delivery accepted over the tenant's limit (or
	// with a body over its byte burst), from a provider that does not
	// retry (Provider.Retries false): it charged nothing; process it when
	// the tenant's quota allows.
	Deferred bool
	// OverQuota names the calendar quotas of the tenant's plan this
	// delivery is over (fleetstore.NewQuota): under QuotaDefer, those
	// whose count it took past n, charged and counted, for the
	// application to bill or drop; with Deferred, those that denied it.
	// A deferred quota is not named on a Local decision: that knows only
	// this node's share of the quota, and its units are not counted in n.
	OverQuota []fleetstore.Kind
	// Local is set when the Store decided the delivery from this node's
	// own state, the shared store being out (fleetstore's degraded mode).
	Local bool
}

// Sink makes hooks durable: a queue, a log, a database.
type Sink interface {
	// Store stores h durably, within ctx (the handler's SinkTimeout,
	// detached from the request: a sender that hangs up does not cancel
	// it). nil means durable: the handler commits the claim and answers
	// it as stored (202, or the provider's AcceptStatus). An error (or a
	// panic) means not stored: the handler releases the claim, so that
	// the provider's retry is taken, and answers 503.
	// The error is logged as it is (once, when the Sink starts failing):
	// it must not quote the body.
	// h.Body is not retained by the handler: the Sink may keep it.
	Store(ctx context.Context, h *Hook) error
}

// SinkFunc is a func as a Sink.
type SinkFunc func(ctx context.Context, h *Hook) error

// Store calls f.
func (f SinkFunc) Store(ctx context.Context, h *Hook) error { return f(ctx, h) }
