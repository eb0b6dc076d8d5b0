package webhook

import (
	"log/slog"
	"time"

	"go.uber.org/zap/zapcore"

	"github.com/fleetstore/fleetstore"
)

// Delivery is what the handler did with one delivery, handed to
// Config.OnDelivery once its answer is written: enough for an access log,
// per-tenant counts and alerts, with no secret, signature or body.
//
// It is an access-log line in one call, with log/slog or zap:
//
//	OnDelivery: func(d *webhook.Delivery) { logger.Info("delivery", "delivery", d) }
//	OnDelivery: func(d *webhook.Delivery) { zl.Info("delivery", zap.Object("delivery", d)) }
//
// Its keys are the fields' names in snake case: provider, tenant,
// event_id, hook_id, status, outcome, local, near_limit, over_quota,
// shadow_denied, received, hit, sink, settle and total. A field at its zero value is
// left out, but provider, status, outcome, received and total.
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
	// OverQuota lists the kinds of the plan's calendar quotas this
	// delivery is over (fleetstore.NewQuota): its count with this
	// delivery is past n, whatever Config.OverQuota made of it (the
	// outcomes OverQuota, Dropped, RateLimited or Deferred), but a
	// deferred quota on a Local decision. Hook.OverQuota holds them too.
	OverQuota []fleetstore.Kind
	// ShadowDenied lists the kinds of the plan's shadow limits
	// (fleetstore.Limit.Shadow) that would have refused this delivery.
	ShadowDenied []fleetstore.Kind
	// Received is when the handler took the delivery (Config.Now).
	Received time.Time
	// Hit, Sink and Settle are how long the Store's Hit (both Hits of a
	// denial), the Sink, and the Commit or Release took; 0 when not made.
	Hit, Sink, Settle time.Duration
	// Total is how long the handler took, from the call of ServeHTTP to
	// the answer written: Hit, Sink and Settle, and the rest of the work
	// (reading the body, verifying it). Like them it is measured on the
	// monotonic clock, not on Config.Now.
	Total time.Duration
}

var (
	_ slog.LogValuer          = (*Delivery)(nil)
	_ zapcore.ObjectMarshaler = (*Delivery)(nil)
)

// LogValue implements slog.LogValuer: d as a group of the keys its doc
// lists.
func (d *Delivery) LogValue() slog.Value {
	attrs := make([]slog.Attr, 0, 15)
	attrs = append(attrs, slog.String("provider", d.Provider))
	for _, f := range []struct{ key, v string }{
		{"tenant", d.Tenant}, {"event_id", d.EventID}, {"hook_id", d.HookID},
	} {
		if f.v != "" {
			attrs = append(attrs, slog.String(f.key, f.v))
		}
	}
	attrs = append(attrs, slog.Int("status", d.Status), slog.String("outcome", d.Outcome.String()))
	if d.Local {
		attrs = append(attrs, slog.Bool("local", true))
	}
	if len(d.NearLimit) > 0 {
		attrs = append(attrs, slog.Any("near_limit", kinds(d.NearLimit)))
	}
	if len(d.OverQuota) > 0 {
		attrs = append(attrs, slog.Any("over_quota", kinds(d.OverQuota)))
	}
	if len(d.ShadowDenied) > 0 {
		attrs = append(attrs, slog.Any("shadow_denied", kinds(d.ShadowDenied)))
	}
	attrs = append(attrs, slog.Time("received", d.Received))
	for _, f := range []struct {
		key string
		d   time.Duration
	}{{"hit", d.Hit}, {"sink", d.Sink}, {"settle", d.Settle}} {
		if f.d != 0 {
			attrs = append(attrs, slog.Duration(f.key, f.d))
		}
	}
	attrs = append(attrs, slog.Duration("total", d.Total))
	return slog.GroupValue(attrs...)
}

// MarshalLogObject implements zapcore.ObjectMarshaler: d as an object of
// the keys its doc lists, those of LogValue.
func (d *Delivery) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	for _, a := range d.LogValue().Group() {
		v := a.Value
		switch v.Kind() {
		case slog.KindString:
			enc.AddString(a.Key, v.String())
		case slog.KindInt64:
			enc.AddInt64(a.Key, v.Int64())
		case slog.KindBool:
			enc.AddBool(a.Key, v.Bool())
		case slog.KindTime:
			enc.AddTime(a.Key, v.Time())
		case slog.KindDuration:
			enc.AddDuration(a.Key, v.Duration())
		default: // near_limit, over_quota, shadow_denied: kinds
			ks, _ := v.Any().([]string)
			err := enc.AddArray(a.Key, zapcore.ArrayMarshalerFunc(func(arr zapcore.ArrayEncoder) error {
				for _, k := range ks {
					arr.AppendString(k)
				}
				return nil
			}))
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// kinds is ks as strings, for a log line.
func kinds(ks []fleetstore.Kind) []string {
	s := make([]string, len(ks))
	for i, k := range ks {
		s[i] = string(k)
	}
	return s
}
