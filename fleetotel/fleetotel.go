// Package fleetotel reports a fleetstore Store's calls to OpenTelemetry:
// metrics and spans made from the Store's observe.Event values (fleetstore
// CONTRACT §1.5), following the OpenTelemetry semantic conventions for
// database clients (semconv v1.43.0).
//
//	obs, err := fleetotel.New() // the global providers; WithMeterProvider, WithTracerProvider
//	store, err := fleetstore.Open(url, fleetstore.WithObserver(obs))
//
// It is a module of its own, github.com/fleetstore/fleetstore/fleetotel,
// as go-redis keeps redisotel in extra/: a program that does not import it
// does not get OpenTelemetry's dependencies.
//
// A webhook handler's deliveries are counted by ObserveDelivery, given as
// its webhook.Config.OnDelivery:
//
//	webhook.New(webhook.Config{..., OnDelivery: obs.ObserveDelivery})
//
// # Metrics
//
// Every metric has the attributes WithAttributes adds. The Store's have
// db.system.name (the URL's scheme without its variant: "redis" for
// rediss:// and redis+cluster://, "valkey", "memcached", "memory"):
//
//   - db.client.operation.duration (histogram, s): every call, with
//     db.operation.name ("hit", "commit", "release", "reset", "ping",
//     "peek", "replay": a batch of the degraded mode's outbox replayed),
//     fleetstore.local (decided from this node's state) and error.type
//     when it failed. Buckets from 100µs to 1s (DurationBuckets).
//   - fleetstore.client.hits (counter, {hit}): every Hit decided, with
//     fleetstore.hit.outcome ("ok", "duplicate", "pending",
//     "rate_limited") and fleetstore.local.
//   - fleetstore.client.denials (counter, {denial}): per bucket kind that
//     denied a rate-limited Hit, with fleetstore.bucket.kind ("hooks",
//     "bytes", …: the application's few kinds, at most MaxKinds of them,
//     the rest "_OTHER").
//   - fleetstore.client.errors (counter, {error}): every call that failed,
//     with db.operation.name and error.type (observe.Class:
//     "timeout", "unavailable", "invalid", "claim_lost", "closed",
//     "cancelled", …).
//   - With the degraded mode (WithFallback), observable instruments read
//     Store.Stats at every collection: fleetstore.client.degraded (gauge,
//     1 while degraded, else 0), fleetstore.client.outbox (gauge,
//     {commit}: commits queued for replay now), and the counters
//     fleetstore.client.outages {outage}, .local_decisions {hit},
//     .queued, .replayed, .conflicts, .expired, .dropped {commit},
//     .claims_dropped {hit}.
//
// The webhook metrics, recorded by ObserveDelivery, have
// fleetstore.webhook.provider (webhook.Provider.Name: "github", "stripe",
// …, at most MaxProviders of them, the rest "_OTHER"):
//
//   - fleetstore.webhook.deliveries (counter, {delivery}): every delivery
//     answered, with http.response.status_code, fleetstore.webhook.outcome
//     (webhook.Outcome's name: "stored", "duplicate", "pending",
//     "rate_limited", "deferred", "forged", …) and fleetstore.local (the
//     degraded mode decided its Hit).
//   - fleetstore.webhook.near_limit (counter, {crossing}): per bucket kind
//     a delivery took past webhook.Config.NearLimit (once per crossing),
//     with fleetstore.bucket.kind (at most MaxKinds per provider, the rest
//     "_OTHER").
//   - fleetstore.webhook.sink.duration (histogram, s): every Sink call,
//     with the deliveries' attributes. Buckets from 100µs to 10s
//     (SinkBuckets). The Hit and the Commit or Release of a delivery are
//     the Store's db.client.operation.duration.
//
// # Spans
//
// One span per call, of kind client, named by its db.operation.name,
// starting and ending when the call did, a child of the span in the
// call's context. Attributes: db.system.name, db.operation.name,
// fleetstore.local; a Hit's or Peek's fleetstore.charges and, when decided,
// fleetstore.hit.outcome and fleetstore.hit.denied_kinds; a batch's
// fleetstore.claims, fleetstore.claims.failed and db.operation.batch.size
// (2 claims or more); a failed call's error.type and an error status whose
// description is that class, never the error's text. The span is made
// after the call (the Observer is told then), so a driver's own spans
// (redisotel's) are its siblings under the caller's span, not its
// children.
//
// # What is never an attribute
//
// Tenants, keys, source ids, event ids, hook ids and nodes: the Store's
// Event does not carry them, so no metric or span can be labelled with
// them, and ObserveDelivery reads no tenant, event id or hook id of a
// webhook.Delivery. Error messages (which name claims) are not recorded
// either: error.type is the class.
//
// # Prometheus
//
// OpenTelemetry's Prometheus exporter
// (go.opentelemetry.io/otel/exporters/prometheus, of the OpenTelemetry
// release this module requires) is a metric reader: give the
// MeterProvider it reads to New, and serve its registry with promhttp
// (Example_prometheus). It names the metrics Prometheus's way. Dots are
// underscores, a counter ends in _total, the unit s in _seconds and the
// unit 1 in _ratio; a unit in braces is dropped. A scrape shows these
// names (TestPrometheusNames scrapes them):
//
//	OpenTelemetry                      Prometheus, as scraped                    type
//	db.client.operation.duration       db_client_operation_duration_seconds      histogram
//	fleetstore.client.hits             fleetstore_client_hits_total              counter
//	fleetstore.client.denials          fleetstore_client_denials_total           counter
//	fleetstore.client.errors           fleetstore_client_errors_total            counter
//	fleetstore.client.degraded         fleetstore_client_degraded_ratio          gauge
//	fleetstore.client.outbox           fleetstore_client_outbox                  gauge
//	fleetstore.client.outages          fleetstore_client_outages_total           counter
//	fleetstore.client.local_decisions  fleetstore_client_local_decisions_total   counter
//	fleetstore.client.queued           fleetstore_client_queued_total            counter
//	fleetstore.client.replayed         fleetstore_client_replayed_total          counter
//	fleetstore.client.conflicts        fleetstore_client_conflicts_total         counter
//	fleetstore.client.expired          fleetstore_client_expired_total           counter
//	fleetstore.client.dropped          fleetstore_client_dropped_total           counter
//	fleetstore.client.claims_dropped   fleetstore_client_claims_dropped_total    counter
//	fleetstore.webhook.deliveries      fleetstore_webhook_deliveries_total       counter
//	fleetstore.webhook.near_limit      fleetstore_webhook_near_limit_total       counter
//	fleetstore.webhook.sink.duration   fleetstore_webhook_sink_duration_seconds  histogram
//	the exporter's resource            target_info                               gauge
//
// A histogram's series are NAME_bucket, NAME_sum and NAME_count. A metric
// shows once it has a point; the degraded mode's ones with a fallback
// only. Attributes are labels, named the same way
// (fleetstore_webhook_outcome), with the scope's (otel_scope_name).
//
// # Cost
//
// With no-op providers (trace/noop, metric/noop) a call adds a few table
// look-ups and no allocation, and so does a delivery; with the SDK, what
// the SDK costs, its metrics allocating nothing either. See BenchmarkHit
// and BenchmarkObserveDelivery in this module.
package fleetotel

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/semconv/v1.43.0/dbconv"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/observe"
)

// ScopeName is the instrumentation scope of the meter and tracer.
const ScopeName = "github.com/fleetstore/fleetstore/fleetotel"

// MaxKinds is how many bucket kinds fleetstore.client.denials, and
// fleetstore.webhook.near_limit per provider, tell apart; the rest are
// counted as "_OTHER".
const MaxKinds = 64

// DurationBuckets are db.client.operation.duration's bucket boundaries,
// in seconds: finer than the convention's advice (1ms–10s) below 1ms,
// where a memory Hit and a Redis round trip fall, and up to 1s (a budget
// is 100ms by default).
var DurationBuckets = []float64{
	0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
}

// Attribute keys of this package's own (the convention's are semconv's).
const (
	LocalKey       = attribute.Key("fleetstore.local")
	OutcomeKey     = attribute.Key("fleetstore.hit.outcome")
	DeniedKindsKey = attribute.Key("fleetstore.hit.denied_kinds")
	KindKey        = attribute.Key("fleetstore.bucket.kind")
	ChargesKey     = attribute.Key("fleetstore.charges")
	ClaimsKey      = attribute.Key("fleetstore.claims")
	FailedKey      = attribute.Key("fleetstore.claims.failed")
)

// Option configures New.
type Option func(*config)

type config struct {
	mp    metric.MeterProvider
	tp    trace.TracerProvider
	attrs []attribute.KeyValue
}

// WithMeterProvider sets the meter provider. Default otel.GetMeterProvider();
// nil keeps the default.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) {
		if mp != nil {
			c.mp = mp
		}
	}
}

// WithTracerProvider sets the tracer provider. Default
// otel.GetTracerProvider(); nil keeps the default.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) {
		if tp != nil {
			c.tp = tp
		}
	}
}

// WithAttributes adds attrs to every metric and span (a deployment's
// name, a region, which Store it is). They are the caller's choice: put
// no tenant, key or hook id in them. Two Stores in one process whose
// Observers share a MeterProvider need attributes that tell them apart
// (attribute.String("fleetstore.store", "edge-limits")), or a provider
// each: otherwise their points, the degraded and outbox gauges among
// them, carry one attribute set and overwrite each other.
func WithAttributes(attrs ...attribute.KeyValue) Option {
	return func(c *config) { c.attrs = append(c.attrs, attrs...) }
}

// Observer is an observe.StoreObserver reporting to OpenTelemetry. Give
// it to one Store (fleetstore.WithObserver); New makes one per Store. It
// is safe for concurrent use. Observers of several Stores on one
// MeterProvider need distinguishing WithAttributes (see there): the
// metrics carry no attribute of the Store's own beyond db.system.name.
type Observer struct {
	tracer trace.Tracer // nil: no spans (a no-op tracer)
	meter  metric.Meter
	attrs  []attribute.KeyValue

	duration metric.Float64Histogram
	hits     metric.Int64Counter
	denials  metric.Int64Counter
	errs     metric.Int64Counter

	degraded, outbox metric.Int64ObservableGauge
	outages, localDecisions, queued, replayed,
	conflicts, expired, dropped, claimsDropped metric.Int64ObservableCounter

	mu    sync.Mutex               // Attach, Detach
	store atomic.Pointer[attached] // the last Store's, kept after Detach for its calls after Close
	busy  bool                     // attached to a Store now (under mu)

	hookMetrics // ObserveDelivery's instruments and attribute sets
}

// attached is what Attach prepares for one Store: the attribute sets of
// every combination an Event can take, built once, so that a call
// records without building any.
type attached struct {
	system   attribute.KeyValue
	base     []attribute.KeyValue // db.system.name and WithAttributes'
	otherOpt []metric.AddOption   // a denial of a kind past MaxKinds
	// kinds is a denial's attribute set per bucket kind, at most MaxKinds.
	kinds capped[fleetstore.Kind, []metric.AddOption]

	durOpt [nOps][nClasses][2][]metric.RecordOption // op, class, local
	hitOpt [nOutcomes][2][]metric.AddOption         // outcome, local
	errOpt [nOps][nClasses][]metric.AddOption       // op, class
	reg    metric.Registration                      // the Stats callback; nil without a fallback
}

const (
	nOps      = int(observe.OpPeek) + 1
	nClasses  = int(observe.ClassOther) + 1
	nOutcomes = int(fleetstore.RateLimited) + 1
)

var _ observe.StoreObserver = (*Observer)(nil)

// New returns an Observer on the providers opts give (the global ones by
// default), its instruments created.
//
// Errors: the meter's, creating an instrument.
func New(opts ...Option) (*Observer, error) {
	c := config{mp: otel.GetMeterProvider(), tp: otel.GetTracerProvider()}
	for _, opt := range opts {
		opt(&c)
	}
	o := &Observer{attrs: c.attrs}
	o.meter = c.mp.Meter(ScopeName, metric.WithSchemaURL(semconv.SchemaURL))
	t := c.tp.Tracer(ScopeName, trace.WithSchemaURL(semconv.SchemaURL))
	if _, isNoop := t.(noop.Tracer); !isNoop {
		o.tracer = t
	}
	m := o.meter
	var dur dbconv.ClientOperationDuration // the convention's name and unit
	var err, e error
	o.duration, err = m.Float64Histogram(dur.Name(), metric.WithUnit(dur.Unit()),
		metric.WithDescription("Duration of fleetstore Store calls."),
		metric.WithExplicitBucketBoundaries(DurationBuckets...))
	type desc struct{ name, unit, text string }
	const prefix = "fleetstore.client."
	for inst, d := range map[*metric.Int64Counter]desc{
		&o.hits: {"hits", "{hit}", "Hits decided, by outcome and whether this node " +
			"decided them alone (degraded mode)."},
		&o.denials: {"denials", "{denial}", "Buckets that denied a rate-limited Hit, by bucket kind."},
		&o.errs: {"errors", "{error}", "Store calls that returned an error, " +
			"by operation and error class."},
	} {
		*inst, e = m.Int64Counter(prefix+d.name, metric.WithUnit(d.unit), metric.WithDescription(d.text))
		err = errors.Join(err, e)
	}
	for inst, d := range map[*metric.Int64ObservableGauge]desc{
		&o.degraded: {"degraded", "1", "1 while the Store decides from this node's state " +
			"(degraded mode), else 0."},
		&o.outbox: {"outbox", "{commit}", "Commits queued in the degraded mode's outbox, " +
			"awaiting replay."},
	} {
		*inst, e = m.Int64ObservableGauge(prefix+d.name, metric.WithUnit(d.unit),
			metric.WithDescription(d.text))
		err = errors.Join(err, e)
	}
	for inst, d := range map[*metric.Int64ObservableCounter]desc{
		&o.outages:        {"outages", "{outage}", "Times the Store went degraded."},
		&o.localDecisions: {"local_decisions", "{hit}", "Hits decided from this node's local store."},
		&o.queued:         {"queued", "{commit}", "Commits queued in the outbox."},
		&o.replayed:       {"replayed", "{commit}", "Queued commits recorded in the shared store."},
		&o.conflicts:      {"conflicts", "{commit}", "Replayed commits that met another hook's claim."},
		&o.expired:        {"expired", "{commit}", "Queued commits whose TTL ran out unreplayed."},
		&o.dropped: {"dropped", "{commit}", "Commits not queued (outbox full) " +
			"or dropped after refused replays."},
		&o.claimsDropped: {"claims_dropped", "{hit}", "Local Hits decided without a local claim " +
			"(the local claim cap)."},
	} {
		*inst, e = m.Int64ObservableCounter(prefix+d.name, metric.WithUnit(d.unit),
			metric.WithDescription(d.text))
		err = errors.Join(err, e)
	}
	if err = errors.Join(err, o.hookMetrics.init(m, c.attrs)); err != nil {
		return nil, err
	}
	return o, nil
}

// errNil is Attach's error for a nil *Observer.
var errNil = errors.New("fleetotel: a nil *Observer (make one with fleetotel.New)")

// errAttached is Attach's error for a second Store.
var errAttached = errors.New("fleetotel: this Observer already observes a Store " +
	"(make one with fleetotel.New for each)")

// Attach prepares the attribute sets for the Store's scheme and, when it
// has the degraded mode, registers the callback that reads its Stats. It
// is called by fleetstore.Open.
//
// Errors: the Observer is nil (not made by New: fleetstore.Open then
// fails with ErrInvalid naming "observer"); the Observer already observes
// a Store; the meter's, registering the callback.
func (o *Observer) Attach(info observe.StoreInfo) error {
	if o == nil {
		return errNil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.busy {
		return errAttached
	}
	a := o.prepare(System(info.Scheme))
	if info.Fallback && info.Stats != nil {
		stats := info.Stats
		opt := metric.WithAttributeSet(attribute.NewSet(a.base...))
		reg, err := o.meter.RegisterCallback(func(_ context.Context, ob metric.Observer) error {
			s := stats()
			deg := int64(0)
			if s.Degraded {
				deg = 1
			}
			ob.ObserveInt64(o.degraded, deg, opt)
			ob.ObserveInt64(o.outbox, int64(s.Outbox), opt)
			for _, c := range []struct {
				inst metric.Int64ObservableCounter
				v    uint64
			}{
				{o.outages, s.Outages}, {o.localDecisions, s.LocalDecisions},
				{o.queued, s.Queued}, {o.replayed, s.Replayed},
				{o.conflicts, s.Conflicts}, {o.expired, s.Expired},
				{o.dropped, s.Dropped}, {o.claimsDropped, s.ClaimsDropped},
			} {
				ob.ObserveInt64(c.inst, int64(min(c.v, 1<<63-1)), opt)
			}
			return nil
		}, o.degraded, o.outbox, o.outages, o.localDecisions, o.queued, o.replayed,
			o.conflicts, o.expired, o.dropped, o.claimsDropped)
		if err != nil {
			return err
		}
		a.reg = reg
	}
	o.store.Store(a)
	o.busy = true
	return nil
}

// Detach unregisters the Stats callback; the Observer may then observe
// another Store. The closed Store's calls (ErrClosed) are still recorded
// until then. It is called by Store.Close.
func (o *Observer) Detach() {
	if o == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if a := o.store.Load(); o.busy && a.reg != nil {
		_ = a.reg.Unregister() // only fails for a callback already gone
	}
	o.busy = false
}

// prepare builds every attribute set an Event can need.
func (o *Observer) prepare(system attribute.KeyValue) *attached {
	a := &attached{system: system, base: append([]attribute.KeyValue{system}, o.attrs...)}
	with := func(kv ...attribute.KeyValue) attribute.Set {
		return attribute.NewSet(append(append([]attribute.KeyValue(nil), a.base...), kv...)...)
	}
	a.otherOpt = []metric.AddOption{metric.WithAttributeSet(with(KindKey.String("_OTHER")))}
	for op := 1; op < nOps; op++ {
		name := semconv.DBOperationName(observe.Op(op).String())
		for class := range nClasses {
			var errType []attribute.KeyValue
			if class != int(observe.ClassNone) {
				errType = []attribute.KeyValue{semconv.ErrorTypeKey.String(observe.Class(class).String())}
				set := with(append(errType, name)...)
				a.errOpt[op][class] = []metric.AddOption{metric.WithAttributeSet(set)}
			}
			for local := range 2 {
				kv := append([]attribute.KeyValue{name, LocalKey.Bool(local == 1)}, errType...)
				a.durOpt[op][class][local] = []metric.RecordOption{metric.WithAttributeSet(with(kv...))}
			}
		}
	}
	for out := 1; out < nOutcomes; out++ {
		for local := range 2 {
			set := with(OutcomeKey.String(fleetstore.Outcome(out).String()), LocalKey.Bool(local == 1))
			a.hitOpt[out][local] = []metric.AddOption{metric.WithAttributeSet(set)}
		}
	}
	return a
}

// System is the db.system.name of a Store URL's scheme: the scheme
// without its TLS or topology variant ("redis" for rediss and
// redis+cluster, "valkey" for valkeys, "memcached" for memcacheds), the
// well-known names of the convention where it has one (redis, memcached).
func System(scheme string) attribute.KeyValue {
	base, _, _ := strings.Cut(scheme, "+")
	switch base {
	case "redis", "rediss":
		return semconv.DBSystemNameRedis
	case "memcached", "memcacheds":
		return semconv.DBSystemNameMemcached
	case "valkey", "valkeys":
		return semconv.DBSystemNameKey.String("valkey")
	}
	return semconv.DBSystemNameKey.String(base)
}

// Observe records e: its duration, its outcome or error class, its
// denied kinds, and a span. It is called by the Store after every call.
// A nil Observer records nothing.
func (o *Observer) Observe(ctx context.Context, e observe.Event) {
	if o == nil {
		return
	}
	a := o.store.Load()
	op, class := int(e.Op), int(e.Class)
	if a == nil || op <= 0 || op >= nOps || class < 0 || class >= nClasses {
		return
	}
	local := 0
	if e.Local {
		local = 1
	}
	o.duration.Record(ctx, e.Duration.Seconds(), a.durOpt[op][class][local]...)
	if e.Class != observe.ClassNone {
		o.errs.Add(ctx, 1, a.errOpt[op][class]...)
	} else if e.Op == observe.OpHit && int(e.Outcome) > 0 && int(e.Outcome) < nOutcomes {
		o.hits.Add(ctx, 1, a.hitOpt[e.Outcome][local]...)
		for _, k := range e.DeniedKinds() {
			o.denials.Add(ctx, 1, o.kindOpt(a, k)...)
		}
	}
	if o.tracer != nil {
		o.span(ctx, a, &e)
	}
}

// kindOpt is the attribute set of a denial by kind k.
func (o *Observer) kindOpt(a *attached, k fleetstore.Kind) []metric.AddOption {
	return a.kinds.get(k, MaxKinds, a.otherOpt, func() []metric.AddOption {
		kv := append(append([]attribute.KeyValue(nil), a.base...), KindKey.String(string(k)))
		return []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(kv...))}
	})
}

// span records e as a client span, from e.Start for e.Duration.
func (o *Observer) span(ctx context.Context, a *attached, e *observe.Event) {
	attrs := make([]attribute.KeyValue, 0, len(a.base)+8)
	attrs = append(attrs, a.base...)
	attrs = append(attrs, semconv.DBOperationName(e.Op.String()), LocalKey.Bool(e.Local))
	switch e.Op {
	case observe.OpHit:
		attrs = append(attrs, ChargesKey.Int(e.Charges), ClaimsKey.Int(e.Claims))
		if e.Class == observe.ClassNone {
			attrs = append(attrs, OutcomeKey.String(e.Outcome.String()))
		}
		if e.NDenied > 0 {
			kinds := make([]string, 0, e.NDenied)
			for _, k := range e.DeniedKinds() {
				kinds = append(kinds, string(k))
			}
			attrs = append(attrs, DeniedKindsKey.StringSlice(kinds))
		}
	case observe.OpPeek:
		attrs = append(attrs, ChargesKey.Int(e.Charges))
	case observe.OpCommit, observe.OpRelease, observe.OpReplay:
		attrs = append(attrs, ClaimsKey.Int(e.Claims), FailedKey.Int(e.Failed))
		if e.Claims >= 2 {
			attrs = append(attrs, semconv.DBOperationBatchSize(e.Claims))
		}
	}
	if e.Class != observe.ClassNone {
		attrs = append(attrs, semconv.ErrorTypeKey.String(e.Class.String()))
	}
	_, span := o.tracer.Start(ctx, e.Op.String(), trace.WithSpanKind(trace.SpanKindClient),
		trace.WithTimestamp(e.Start), trace.WithAttributes(attrs...))
	if e.Class != observe.ClassNone {
		span.SetStatus(codes.Error, e.Class.String())
	}
	span.End(trace.WithTimestamp(e.Start.Add(e.Duration)))
}
