package fleetotel

import (
	"context"
	"errors"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/webhook"
)

// Attribute keys of the webhook metrics (with fleetstore.local, and
// fleetstore.bucket.kind for near-limit crossings).
const (
	ProviderKey        = attribute.Key("fleetstore.webhook.provider")
	DeliveryOutcomeKey = attribute.Key("fleetstore.webhook.outcome")
)

// MaxProviders is how many providers (webhook.Provider.Name) the webhook
// metrics tell apart; the rest are counted as "_OTHER".
const MaxProviders = 16

// SinkBuckets are fleetstore.webhook.sink.duration's bucket boundaries,
// in seconds: DurationBuckets and up to webhook.DefaultSinkTimeout (10s).
var SinkBuckets = append(DurationBuckets[:len(DurationBuckets):len(DurationBuckets)], 2.5, 5, 10)

// hookMetrics is what ObserveDelivery records with: its instruments, and
// the attribute sets of each provider seen, made on first use.
type hookMetrics struct {
	delivered metric.Int64Counter
	nearLimit metric.Int64Counter
	sink      metric.Float64Histogram

	providers     capped[string, *provider]
	otherProvider *provider // a provider past MaxProviders
}

// provider is one provider's attribute sets: a delivery's per outcome and
// fleetstore.local, a near-limit crossing's per bucket kind.
type provider struct {
	base      []attribute.KeyValue // WithAttributes' and the provider's name
	sets      [256][2]atomic.Pointer[deliverySet]
	kinds     capped[fleetstore.Kind, []metric.AddOption]
	otherKind []metric.AddOption // a crossing of a kind past MaxKinds
}

// deliverySet is the attribute set of a delivery of one outcome, status
// and fleetstore.local.
type deliverySet struct {
	status int
	add    []metric.AddOption
	rec    []metric.RecordOption
}

// init creates the webhook instruments.
func (h *hookMetrics) init(m metric.Meter, attrs []attribute.KeyValue) error {
	var err, e error
	h.delivered, err = m.Int64Counter("fleetstore.webhook.deliveries", metric.WithUnit("{delivery}"),
		metric.WithDescription("Webhook deliveries answered, by provider, status and outcome."))
	h.nearLimit, e = m.Int64Counter("fleetstore.webhook.near_limit", metric.WithUnit("{crossing}"),
		metric.WithDescription("Buckets a delivery took past webhook.Config.NearLimit, "+
			"by provider and bucket kind."))
	err = errors.Join(err, e)
	h.sink, e = m.Float64Histogram("fleetstore.webhook.sink.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of the webhook Sink's calls, by provider and outcome."),
		metric.WithExplicitBucketBoundaries(SinkBuckets...))
	h.otherProvider = newProvider(attrs, "_OTHER")
	return errors.Join(err, e)
}

func newProvider(attrs []attribute.KeyValue, name string) *provider {
	base := append(append([]attribute.KeyValue(nil), attrs...), ProviderKey.String(name))
	p := &provider{base: base}
	p.otherKind = p.kindOpt("_OTHER")
	return p
}

// kindOpt builds the attribute set of a near-limit crossing of kind k.
func (p *provider) kindOpt(k fleetstore.Kind) []metric.AddOption {
	kv := append(append([]attribute.KeyValue(nil), p.base...), KindKey.String(string(k)))
	return []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(kv...))}
}

// set returns the attribute set of d, made the first time its outcome and
// fleetstore.local are seen. A status other than that first one's (not
// the handler's: it answers each outcome with one status) gets a set
// made for it, not kept.
func (p *provider) set(d *webhook.Delivery, local int) *deliverySet {
	slot := &p.sets[d.Outcome][local]
	if s := slot.Load(); s != nil && s.status == d.Status {
		return s
	}
	kv := append(append([]attribute.KeyValue(nil), p.base...),
		semconv.HTTPResponseStatusCode(d.Status), DeliveryOutcomeKey.String(d.Outcome.String()),
		LocalKey.Bool(local == 1))
	opt := metric.WithAttributeSet(attribute.NewSet(kv...))
	s := &deliverySet{status: d.Status, add: []metric.AddOption{opt},
		rec: []metric.RecordOption{opt}}
	if !slot.CompareAndSwap(nil, s) {
		if kept := slot.Load(); kept.status == d.Status {
			return kept
		}
	}
	return s
}

// ObserveDelivery records d, the outcome of one webhook delivery: it
// counts it in fleetstore.webhook.deliveries, each kind of d.NearLimit in
// fleetstore.webhook.near_limit, and its Sink's duration when the Sink
// ran (d.Sink > 0) in fleetstore.webhook.sink.duration (the package
// doc's "Metrics"). Of d it reads the provider, status, outcome, Local,
// NearLimit and Sink: never the tenant, event id or hook id.
//
// It is a webhook.Config.OnDelivery as it is (OnDelivery:
// obs.ObserveDelivery), or is called from the application's own; any
// number of handlers may share it, the Observer attached to a Store or
// not. A nil Observer (or one not made by New) or Delivery records
// nothing.
func (o *Observer) ObserveDelivery(d *webhook.Delivery) {
	if o == nil || o.delivered == nil || d == nil {
		return
	}
	p := o.providers.get(d.Provider, MaxProviders, o.otherProvider, func() *provider {
		return newProvider(o.attrs, d.Provider)
	})
	local := 0
	if d.Local {
		local = 1
	}
	s := p.set(d, local)
	ctx := context.Background()
	o.delivered.Add(ctx, 1, s.add...)
	if d.Sink > 0 {
		o.sink.Record(ctx, d.Sink.Seconds(), s.rec...)
	}
	for _, k := range d.NearLimit {
		o.nearLimit.Add(ctx, 1, p.kinds.get(k, MaxKinds, p.otherKind, func() []metric.AddOption {
			return p.kindOpt(k)
		})...)
	}
}
