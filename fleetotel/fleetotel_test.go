package fleetotel_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/fleetstore/fleetstore"
	_ "github.com/fleetstore/fleetstore/drivers/redis"
	"github.com/fleetstore/fleetstore/fleetotel"
	"github.com/fleetstore/fleetstore/observe"
)

// sdk is an Observer on the OTel SDK with an in-memory metric reader and
// span recorder.
type sdk struct {
	obs    *fleetotel.Observer
	reader *sdkmetric.ManualReader
	spans  *tracetest.SpanRecorder
}

func newSDK(t *testing.T) *sdk {
	t.Helper()
	s := &sdk{reader: sdkmetric.NewManualReader(), spans: tracetest.NewSpanRecorder()}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(s.reader))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(s.spans))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()); _ = tp.Shutdown(context.Background()) })
	obs, err := fleetotel.New(fleetotel.WithMeterProvider(mp), fleetotel.WithTracerProvider(tp),
		fleetotel.WithAttributes(attribute.String("deployment.environment.name", "test")))
	if err != nil {
		t.Fatal(err)
	}
	s.obs = obs
	return s
}

func (s *sdk) collect(t *testing.T) metricdata.ResourceMetrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := s.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	return rm
}

// find returns the metric named name, nil when there is none.
func find(rm metricdata.ResourceMetrics, name string) *metricdata.Metrics {
	for _, sm := range rm.ScopeMetrics {
		for i := range sm.Metrics {
			if sm.Metrics[i].Name == name {
				return &sm.Metrics[i]
			}
		}
	}
	return nil
}

// has reports whether set holds every one of want (and so is a point of
// the combination want names).
func has(set attribute.Set, want ...attribute.KeyValue) bool {
	for _, kv := range want {
		if v, ok := set.Value(kv.Key); !ok || v != kv.Value {
			return false
		}
	}
	return true
}

// sum is the value of the int64 sum (counter or gauge) name's points
// that have want.
func sum(t *testing.T, rm metricdata.ResourceMetrics, name string, want ...attribute.KeyValue) int64 {
	t.Helper()
	m := find(rm, name)
	if m == nil {
		return 0
	}
	var n int64
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		for _, p := range d.DataPoints {
			if has(p.Attributes, want...) {
				n += p.Value
			}
		}
	case metricdata.Gauge[int64]:
		for _, p := range d.DataPoints {
			if has(p.Attributes, want...) {
				n += p.Value
			}
		}
	default:
		t.Fatalf("%s: data %T, want an int64 sum or gauge", name, m.Data)
	}
	return n
}

// count is how many calls db.client.operation.duration recorded with want.
func count(t *testing.T, rm metricdata.ResourceMetrics, want ...attribute.KeyValue) uint64 {
	t.Helper()
	m := find(rm, "db.client.operation.duration")
	if m == nil {
		t.Fatal("no db.client.operation.duration")
	}
	if m.Unit != "s" {
		t.Errorf("duration unit %q, want s", m.Unit)
	}
	h, ok := m.Data.(metricdata.Histogram[float64])
	if !ok {
		t.Fatalf("duration: %T, want a float64 histogram", m.Data)
	}
	var n uint64
	for _, p := range h.DataPoints {
		if has(p.Attributes, want...) {
			n += p.Count
		}
	}
	return n
}

func op(name string) attribute.KeyValue      { return attribute.String("db.operation.name", name) }
func errType(c string) attribute.KeyValue    { return attribute.String("error.type", c) }
func outcome(o string) attribute.KeyValue    { return attribute.String("fleetstore.hit.outcome", o) }
func local(b bool) attribute.KeyValue        { return attribute.Bool("fleetstore.local", b) }
func system(s string) attribute.KeyValue     { return attribute.String("db.system.name", s) }
func bucketKind(k string) attribute.KeyValue { return attribute.String("fleetstore.bucket.kind", k) }

func claim(key, hook string) fleetstore.Claim {
	return fleetstore.Claim{Tenant: "acme", SourceID: "github", Key: key, HookID: hook, Node: "edge-1", TTL: time.Hour, PendingTTL: time.Minute}
}

// TestMetricsAndSpans: a run of calls on memory:// shows in the duration
// histogram per op, the hits counter per outcome, the denials per kind,
// the errors per op and class, and one client span per call with the
// database conventions' attributes.
func TestMetricsAndSpans(t *testing.T) {
	s := newSDK(t)
	st, err := fleetstore.Open("memory://fleetotel-metrics", fleetstore.WithObserver(s.obs))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	hooks := fleetstore.Charge{Kind: fleetstore.Hooks, Tenant: "acme", Increment: time.Second, Capacity: 3 * time.Second} // 3 at once
	bytes := fleetstore.Charge{Kind: fleetstore.Bytes, Tenant: "acme", Increment: time.Microsecond, Capacity: time.Hour}
	ok, limited := 0, 0
	for i := range 10 {
		c := claim(fmt.Sprintf("evt-%d", i), "hook-1")
		res, err := st.Hit(ctx, []fleetstore.Charge{hooks, bytes}, &c)
		if err != nil {
			t.Fatal(err)
		}
		switch res.Outcome {
		case fleetstore.OK:
			ok++
			if err := st.Commit(ctx, c); err != nil {
				t.Fatal(err)
			}
		case fleetstore.RateLimited:
			limited++
		}
	}
	if ok != 3 || limited != 7 {
		t.Fatalf("%d OK, %d rate-limited, want 3 and 7", ok, limited)
	}
	dup := claim("evt-0", "hook-2")
	if res, _ := st.Hit(ctx, nil, &dup); res.Outcome != fleetstore.Duplicate {
		t.Fatalf("retry of a committed event: %v", res.Outcome)
	}
	if err := st.Commit(ctx, claim("evt-0", "hook-2"), claim("evt-new", "hook-2")); !errors.Is(err, fleetstore.ErrClaimLost) {
		t.Fatalf("commit over another hook's claim: %v", err)
	}
	if _, err := st.Hit(ctx, []fleetstore.Charge{{Kind: "Bad", Tenant: "acme", Increment: 1, Capacity: 1}}, nil); !errors.Is(err, fleetstore.ErrInvalid) {
		t.Fatalf("bad kind: %v", err)
	}
	if err := st.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	limit := fleetstore.MustLimit(fleetstore.PerSecond(fleetstore.Hooks, 1, 3))
	if _, err := st.Peek(ctx, "acme", limit); err != nil {
		t.Fatal(err)
	}
	st.Close()
	if _, err := st.Hit(ctx, []fleetstore.Charge{bytes}, nil); !errors.Is(err, fleetstore.ErrClosed) {
		t.Fatalf("hit after close: %v", err)
	}
	calls := 10 + 3 + 1 + 1 + 1 + 1 + 1 + 1 // hits, commits, duplicate, batch commit, invalid, ping, peek, closed

	rm := s.collect(t)
	mem := system("memory")
	for _, tt := range []struct {
		want []attribute.KeyValue
		n    uint64
	}{
		{[]attribute.KeyValue{mem, op("hit")}, 13},
		{[]attribute.KeyValue{mem, op("hit"), errType("invalid")}, 1},
		{[]attribute.KeyValue{mem, op("hit"), errType("closed")}, 1},
		{[]attribute.KeyValue{mem, op("commit")}, 4},
		{[]attribute.KeyValue{mem, op("commit"), errType("claim_lost")}, 1},
		{[]attribute.KeyValue{mem, op("ping"), local(false)}, 1},
		{[]attribute.KeyValue{mem, op("peek"), local(false)}, 1},
		{[]attribute.KeyValue{attribute.String("deployment.environment.name", "test")}, uint64(calls)},
	} {
		if n := count(t, rm, tt.want...); n != tt.n {
			t.Errorf("duration points with %v: %d calls, want %d", tt.want, n, tt.n)
		}
	}
	for _, tt := range []struct {
		name string
		want []attribute.KeyValue
		n    int64
	}{
		{"fleetstore.client.hits", []attribute.KeyValue{mem, outcome("ok"), local(false)}, 3},
		{"fleetstore.client.hits", []attribute.KeyValue{outcome("rate_limited")}, 7},
		{"fleetstore.client.hits", []attribute.KeyValue{outcome("duplicate")}, 1},
		{"fleetstore.client.hits", []attribute.KeyValue{outcome("pending")}, 0},
		{"fleetstore.client.hits", nil, 11}, // a failed Hit is no decision
		{"fleetstore.client.denials", []attribute.KeyValue{mem, bucketKind("hooks")}, 7},
		{"fleetstore.client.denials", []attribute.KeyValue{bucketKind("bytes")}, 0},
		{"fleetstore.client.errors", []attribute.KeyValue{mem, op("commit"), errType("claim_lost")}, 1},
		{"fleetstore.client.errors", []attribute.KeyValue{op("hit"), errType("invalid")}, 1},
		{"fleetstore.client.errors", []attribute.KeyValue{op("hit"), errType("closed")}, 1},
		{"fleetstore.client.errors", nil, 3},
	} {
		if n := sum(t, rm, tt.name, tt.want...); n != tt.n {
			t.Errorf("%s with %v: %d, want %d", tt.name, tt.want, n, tt.n)
		}
	}
	if find(rm, "fleetstore.client.degraded") != nil {
		t.Error("fleetstore.client.degraded reported for a Store without the degraded mode")
	}

	spans := s.spans.Ended()
	if len(spans) != calls {
		t.Fatalf("%d spans, want %d (one per call)", len(spans), calls)
	}
	var limitedSpans, failed int
	for _, sp := range spans {
		a := attribute.NewSet(sp.Attributes()...)
		if sp.SpanKind() != trace.SpanKindClient || !has(a, mem) || !a.HasValue("db.operation.name") {
			t.Errorf("span %q: kind %v, attributes %v; want client, db.system.name memory, db.operation.name", sp.Name(), sp.SpanKind(), sp.Attributes())
		}
		if v, _ := a.Value("db.operation.name"); sp.Name() != v.AsString() {
			t.Errorf("span %q named otherwise than its db.operation.name %q", sp.Name(), v.AsString())
		}
		if !sp.EndTime().After(sp.StartTime()) {
			t.Errorf("span %q: start %v, end %v", sp.Name(), sp.StartTime(), sp.EndTime())
		}
		if has(a, outcome("rate_limited")) {
			limitedSpans++
			if v, _ := a.Value("fleetstore.hit.denied_kinds"); fmt.Sprint(v.AsStringSlice()) != "[hooks]" {
				t.Errorf("rate-limited span: denied kinds %v, want [hooks]", v.AsStringSlice())
			}
		}
		if a.HasValue("error.type") {
			failed++
			if sp.Status().Code != codes.Error || !has(a, attribute.String("error.type", sp.Status().Description)) {
				t.Errorf("failed span %q: status %+v, want Error described by its error.type", sp.Name(), sp.Status())
			}
		} else if sp.Status().Code == codes.Error {
			t.Errorf("span %q: error status without error.type", sp.Name())
		}
		if sp.Name() == "peek" && (!has(a, attribute.Int("fleetstore.charges", 1)) || a.HasValue("fleetstore.hit.outcome")) {
			t.Errorf("peek span: %v, want its one limit and no outcome", sp.Attributes())
		}
		if sp.Name() == "commit" && has(a, attribute.Int("fleetstore.claims", 2)) &&
			!has(a, attribute.Int("db.operation.batch.size", 2), attribute.Int("fleetstore.claims.failed", 1)) {
			t.Errorf("batch commit span: %v, want batch size 2, 1 failed", sp.Attributes())
		}
	}
	if limitedSpans != 7 || failed != 3 {
		t.Errorf("%d rate-limited spans, %d failed ones; want 7 and 3", limitedSpans, failed)
	}
}

// TestSpanParent: the span of a call is a child of the span in the
// call's context.
func TestSpanParent(t *testing.T) {
	s := newSDK(t)
	st, err := fleetstore.Open("memory://fleetotel-parent", fleetstore.WithObserver(s.obs))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(s.spans))
	ctx, parent := tp.Tracer("handler").Start(context.Background(), "webhook")
	c := claim("evt-p", "hook-p")
	if _, err := st.Hit(ctx, nil, &c); err != nil {
		t.Fatal(err)
	}
	parent.End()
	for _, sp := range s.spans.Ended() {
		if sp.Name() == "hit" && (sp.Parent().SpanID() != parent.SpanContext().SpanID() || sp.SpanContext().TraceID() != parent.SpanContext().TraceID()) {
			t.Errorf("hit span's parent %v, want the handler's %v", sp.Parent().SpanID(), parent.SpanContext().SpanID())
		}
	}
}

// deadRedis is a redis:// URL on a loopback port nothing listens on: every
// call is refused (a real refusal, no fake driver).
func deadRedis(t *testing.T, query string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "redis://" + addr + "/0?" + query
}

// TestDegraded: with the shared store refusing every call, Hits are
// recorded as local decisions, commits as local and queued, and the
// observable gauges show the Store degraded with its outbox; after Close
// the gauges are gone.
func TestDegraded(t *testing.T) {
	s := newSDK(t)
	st, err := fleetstore.Open(deadRedis(t, "fallback_nodes=4"), fleetstore.WithObserver(s.obs))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	hooks := fleetstore.Charge{Kind: fleetstore.Hooks, Tenant: "acme", Increment: time.Second, Capacity: 8 * time.Second} // 2 at this node's 1/4
	limited := 0
	for i := range 5 {
		c := claim(fmt.Sprintf("deg-%d", i), "hook-1")
		res, err := st.Hit(ctx, []fleetstore.Charge{hooks}, &c)
		if err != nil || !res.Local {
			t.Fatalf("hit %d on a dead store: %+v %v, want a local decision", i, res, err)
		}
		if res.Outcome == fleetstore.RateLimited {
			limited++
			continue
		}
		if err := st.Commit(ctx, c); err != nil {
			t.Fatalf("commit on a dead store: %v, want it queued", err)
		}
	}
	if limited != 3 {
		t.Fatalf("%d of 5 local hits rate-limited, want 3 (the burst of 8 at a share of 1/4 is 2)", limited)
	}
	rm := s.collect(t)
	red := system("redis")
	if n := sum(t, rm, "fleetstore.client.hits", red, outcome("ok"), local(true)); n != 2 {
		t.Errorf("local OK hits: %d, want 2", n)
	}
	if n := sum(t, rm, "fleetstore.client.hits", outcome("rate_limited"), local(true)); n != 3 {
		t.Errorf("local rate-limited hits: %d, want 3", n)
	}
	if n := count(t, rm, op("commit"), local(true)); n != 2 {
		t.Errorf("local commits: %d, want 2", n)
	}
	if n := sum(t, rm, "fleetstore.client.hits", local(false)); n != 0 {
		t.Errorf("%d hits recorded as decided shared by a dead store", n)
	}
	for _, tt := range []struct {
		name string
		n    int64
	}{
		{"fleetstore.client.degraded", 1},
		{"fleetstore.client.outbox", 2},
		{"fleetstore.client.queued", 2},
		{"fleetstore.client.local_decisions", 5},
		{"fleetstore.client.outages", 1},
		{"fleetstore.client.replayed", 0},
	} {
		if n := sum(t, rm, tt.name, red); n != tt.n {
			t.Errorf("%s: %d, want %d", tt.name, n, tt.n)
		}
	}
	for _, sp := range s.spans.Ended() {
		if a := attribute.NewSet(sp.Attributes()...); sp.Name() == "hit" && !has(a, local(true)) {
			t.Errorf("hit span on a dead store: %v, want fleetstore.local true", sp.Attributes())
		}
	}
	st.Close()
	if m := find(s.collect(t), "fleetstore.client.degraded"); m != nil {
		if g, ok := m.Data.(metricdata.Gauge[int64]); ok && len(g.DataPoints) > 0 {
			t.Errorf("degraded gauge still reported after Close: %+v", g.DataPoints)
		}
	}
}

// TestOneStore: an Observer observes one Store at a time; a second Open
// with it fails with ErrInvalid naming "observer", and it may observe
// another Store once the first is closed.
func TestOneStore(t *testing.T) {
	s := newSDK(t)
	first, err := fleetstore.Open("memory://fleetotel-one", fleetstore.WithObserver(s.obs))
	if err != nil {
		t.Fatal(err)
	}
	var ie *fleetstore.InvalidError
	if second, err := fleetstore.Open("memory://fleetotel-two", fleetstore.WithObserver(s.obs)); second != nil || !errors.As(err, &ie) || ie.Field != "observer" {
		t.Fatalf("second Open: %v, want ErrInvalid naming observer", err)
	}
	first.Close()
	again, err := fleetstore.Open("memory://fleetotel-two", fleetstore.WithObserver(s.obs))
	if err != nil {
		t.Fatalf("Open after the first Store closed: %v", err)
	}
	again.Close()
}

// TestTwoStoresOneProvider: two Stores, each with its own Observer on one
// MeterProvider, keep their degraded gauges apart when WithAttributes
// tells them apart (the Observer's doc: without it their points share
// one attribute set and overwrite each other).
func TestTwoStoresOneProvider(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	ctx := context.Background()
	hooks := fleetstore.Charge{Kind: fleetstore.Hooks, Tenant: "acme", Increment: time.Millisecond, Capacity: time.Second}
	for i, name := range []string{"a", "b"} {
		o, err := fleetotel.New(fleetotel.WithMeterProvider(mp), fleetotel.WithAttributes(attribute.String("fleetstore.store", name)))
		if err != nil {
			t.Fatal(err)
		}
		st, err := fleetstore.Open(deadRedis(t, "fallback_nodes=2"), fleetstore.WithObserver(o))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		for j := range i + 1 { // a queues 1 commit, b 2
			c := claim(fmt.Sprintf("two-%s-%d", name, j), "hook-1")
			if _, err := st.Hit(ctx, []fleetstore.Charge{hooks}, &c); err != nil {
				t.Fatal(err)
			}
			if err := st.Commit(ctx, c); err != nil {
				t.Fatal(err)
			}
		}
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]int64{"a": 1, "b": 2} {
		if n := sum(t, rm, "fleetstore.client.outbox", attribute.String("fleetstore.store", name)); n != want {
			t.Errorf("store %s: outbox gauge %d, want %d", name, n, want)
		}
	}
}

// TestNilObserver: a nil *Observer fails Open with ErrInvalid naming the
// observer instead of panicking, and its methods do nothing.
func TestNilObserver(t *testing.T) {
	var o *fleetotel.Observer
	var ie *fleetstore.InvalidError
	if st, err := fleetstore.Open("memory://fleetotel-nil", fleetstore.WithObserver(o)); st != nil || !errors.As(err, &ie) || ie.Field != "observer" {
		t.Fatalf("Open: %v, want ErrInvalid naming observer", err)
	}
	o.Observe(context.Background(), observe.Event{Op: observe.OpHit})
	o.Detach()
}

// TestNoIdentityInTelemetry: no tenant, key, source id, hook id or node
// appears anywhere in what is exported, metrics or spans, for calls that
// succeed, fail naming their claims (ClaimLost), and are decided locally.
func TestNoIdentityInTelemetry(t *testing.T) {
	const secret = "zq7secret"
	id := func(what string) string { return what + "-" + secret }
	c := fleetstore.Claim{Tenant: id("tenant"), SourceID: id("source"), Key: id("key"), HookID: id("hook"), Node: id("node"), TTL: time.Hour, PendingTTL: time.Minute}
	other := c
	other.HookID = id("other")
	charge := fleetstore.Charge{Kind: fleetstore.Hooks, Tenant: c.Tenant, Increment: time.Second, Capacity: time.Second}
	ctx := context.Background()
	for _, url := range []string{"memory://fleetotel-identity", deadRedis(t, "fallback_nodes=1")} {
		s := newSDK(t)
		st, err := fleetstore.Open(url, fleetstore.WithObserver(s.obs))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Hit(ctx, []fleetstore.Charge{charge}, &c); err != nil {
			t.Fatal(err)
		}
		_, _ = st.Hit(ctx, []fleetstore.Charge{charge}, &other) // pending or rate-limited
		_ = st.Commit(ctx, c)
		err = st.Commit(ctx, other)
		if strings.HasPrefix(url, "memory:") && !strings.Contains(fmt.Sprint(err), secret) {
			t.Fatalf("%s: commit over another hook's claim: %v, want an error naming the claim (so the test can see it is kept out)", url, err)
		}
		_ = st.Release(ctx, c)
		_ = st.Reset(ctx, c.Tenant)
		st.Close()
		rm := s.collect(t)
		if dump := fmt.Sprintf("%+v", rm); strings.Contains(dump, secret) {
			t.Errorf("%s: metrics hold an identity: %s", url, dump)
		}
		spans := s.spans.Ended()
		if len(spans) < 6 {
			t.Fatalf("%s: %d spans, want one per call", url, len(spans))
		}
		for _, sp := range spans {
			dump := fmt.Sprintf("%s %+v %+v %+v %+v %+v", sp.Name(), sp.Attributes(), sp.Status(), sp.Events(), sp.Links(), sp.Resource())
			if strings.Contains(dump, secret) {
				t.Errorf("%s: span holds an identity: %s", url, dump)
			}
		}
	}
}

// TestSystem: db.system.name per scheme.
func TestSystem(t *testing.T) {
	for scheme, want := range map[string]string{
		"redis": "redis", "rediss": "redis", "redis+cluster": "redis", "redis+sentinel": "redis",
		"valkey": "valkey", "valkeys+cluster": "valkey", "memcached": "memcached", "memcacheds": "memcached",
		"memory": "memory", "custom+x": "custom",
	} {
		if got := fleetotel.System(scheme).Value.AsString(); got != want {
			t.Errorf("System(%q) = %q, want %q", scheme, got, want)
		}
	}
}

// TestDenialKindsCapped: fleetstore.client.denials tells MaxKinds kinds
// apart and counts the rest as _OTHER, so that an application minting
// kinds cannot grow the metric without bound.
func TestDenialKindsCapped(t *testing.T) {
	s := newSDK(t)
	if err := s.obs.Attach(observe.StoreInfo{Scheme: "memory"}); err != nil {
		t.Fatal(err)
	}
	defer s.obs.Detach()
	const extra = 5
	for i := range fleetotel.MaxKinds + extra {
		e := observe.Event{Op: observe.OpHit, Start: time.Now(), Outcome: fleetstore.RateLimited, Charges: 1, NDenied: 1}
		e.Denied[0] = fleetstore.Kind(fmt.Sprintf("k%d", i))
		s.obs.Observe(context.Background(), e)
		s.obs.Observe(context.Background(), e) // a kind seen again is the same point
	}
	rm := s.collect(t)
	m := find(rm, "fleetstore.client.denials")
	if m == nil {
		t.Fatal("no fleetstore.client.denials")
	}
	points := m.Data.(metricdata.Sum[int64]).DataPoints
	if len(points) != fleetotel.MaxKinds+1 {
		t.Errorf("%d denial points, want %d kinds and _OTHER", len(points), fleetotel.MaxKinds)
	}
	if n := sum(t, rm, "fleetstore.client.denials", bucketKind("_OTHER")); n != 2*extra {
		t.Errorf("_OTHER: %d denials, want %d", n, 2*extra)
	}
	if n := sum(t, rm, "fleetstore.client.denials", bucketKind("k0")); n != 2 {
		t.Errorf("k0: %d denials, want 2", n)
	}
}
