package webhook

import (
	"time"

	"github.com/fleetstore/fleetstore"
)

// Delivery is what the handler did with one delivery, handed to
// Config.OnDelivery once its answer is written: enough for an access log,
// per-tenant counts and alerts, with no secret, signature or body.
type Delivery struct {
	// Tenant is the tenant Config.Tenant named ("" when it named none);
	// for a Forged delivery, what the sender claimed, unverified.
	Tenant string
	// Provider is Provider.Name.
	Provider string
	// EventID is the provider's event id once the delivery verified
	// ("" before); HookID the hook's id once one was made.
	EventID, HookID string
	// Status is the HTTP status answered, Outcome the row of the package
	// doc's "Statuses" table it answers.
	Status  int
	Outcome Outcome
	// Local is set when the degraded mode decided the delivery's Hit
	// (fleetstore.Result.Local).
	Local bool
	// NearLimit lists the kinds whose bucket this delivery took past
	// Config.NearLimit, in the plan's order; nil for most deliveries.
	NearLimit []fleetstore.Kind
	// ShadowDenied lists the kinds of the plan's shadow limits
	// (fleetstore.Limit.Shadow) that would have refused this delivery.
	ShadowDenied []fleetstore.Kind
	// Received is when the handler took the delivery (Config.Now).
	Received time.Time
	// Hit, Sink and Settle are how long the Store's Hit (both Hits of a
	// denial), the Sink, and the Commit or Release took; 0 when not made.
	Hit, Sink, Settle time.Duration
}
