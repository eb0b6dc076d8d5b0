// Command otelbench runs a short webhook load against a fleetstore URL with
// fleetotel's Observer on the OpenTelemetry SDK, and prints what the SDK's
// stdout exporters export: the first hooks' traces (a "webhook" span of
// this program, the Store's "hit" and "commit" spans under it) and the
// first of each other outcome (rate-limited, duplicate), then the metrics
// of the whole run, as JSON.
//
//	cd fleetotel && go run ./cmd/otelbench   # memory://, 300 hooks
//	# a dead store: degraded mode
//	go run ./cmd/otelbench -url 'redis://127.0.0.1:1/0?fallback_nodes=4'
//
// The load: -n hooks over -tenants tenants, one after another, each a Hit
// of one hooks charge (-rate per second, a burst of -burst) and a claim on
// a fresh event key, committed when OK; every -dup'th hook redelivers the
// previous one's event (Duplicate). With the defaults most hooks are OK
// and the rest rate-limited once a tenant's burst is spent. A summary
// goes to stderr.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/stdout/stdoutmetric"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/fleetstore/fleetstore"
	_ "github.com/fleetstore/fleetstore/drivers/memcached"
	_ "github.com/fleetstore/fleetstore/drivers/redis"
	_ "github.com/fleetstore/fleetstore/drivers/valkey"
	"github.com/fleetstore/fleetstore/fleetotel"
	"github.com/fleetstore/fleetstore/observe"
)

func main() {
	url := flag.String("url", "memory://", "the store's URL")
	n := flag.Int("n", 300, "hooks to send")
	tenants := flag.Int("tenants", 3, "tenants the hooks are spread over")
	rate := flag.Int64("rate", 100, "each tenant's hooks per second")
	burst := flag.Int64("burst", 80, "each tenant's burst, in hooks")
	dup := flag.Int("dup", 25, "every dup'th hook redelivers the previous event (0: never)")
	traces := flag.Int("traces", 2,
		"hooks whose traces are printed (and the first of each other outcome)")
	flag.Parse()
	if err := run(*url, *n, *tenants, *rate, *burst, *dup, *traces); err != nil {
		fmt.Fprintln(os.Stderr, "otelbench:", err)
		os.Exit(1)
	}
}

func run(url string, n, tenants int, rate, burst int64, dup, traces int) error {
	if n < 1 || tenants < 1 || rate < 1 || burst < 1 || dup < 0 || traces < 0 {
		return fmt.Errorf("want -n, -tenants, -rate, -burst ≥ 1 and -dup, -traces ≥ 0")
	}
	limit, err := fleetstore.NewLimit(fleetstore.Hooks, rate, time.Second, burst)
	if err != nil {
		return err
	}
	res := resource.NewSchemaless(attribute.String("service.name", "otelbench"))
	texp, err := stdouttrace.New(stdouttrace.WithPrettyPrint())
	if err != nil {
		return err
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithResource(res),
		sdktrace.WithSyncer(&firstTraces{SpanExporter: texp, max: traces}))
	mexp, err := stdoutmetric.New(stdoutmetric.WithPrettyPrint())
	if err != nil {
		return err
	}
	reader := sdkmetric.NewPeriodicReader(mexp, sdkmetric.WithInterval(time.Hour))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithResource(res), sdkmetric.WithReader(reader))
	obs, err := fleetotel.New(fleetotel.WithMeterProvider(mp), fleetotel.WithTracerProvider(tp))
	if err != nil {
		return err
	}
	store, err := fleetstore.Open(url, fleetstore.WithObserver(obs))
	if err != nil {
		return err
	}
	ctx := context.Background()
	tracer := tp.Tracer("otelbench")
	counts := map[string]int{}
	for i := range n {
		tenant := fmt.Sprintf("tenant-%d", i%tenants)
		key := fmt.Sprintf("delivery-%d", i)
		if dup > 0 && i%dup == dup-1 { // the provider redelivers the previous event
			tenant, key = fmt.Sprintf("tenant-%d", (i-1)%tenants), fmt.Sprintf("delivery-%d", i-1)
		}
		hctx, span := tracer.Start(ctx, "webhook", trace.WithSpanKind(trace.SpanKindServer))
		claim := fleetstore.Claim{Tenant: tenant, SourceID: "github", Key: key,
			HookID: fmt.Sprintf("hook-%d", i), Node: "edge-1", TTL: time.Hour, PendingTTL: time.Minute}
		r, err := store.Hit(hctx, []fleetstore.Charge{limit.Charge(tenant, 1)}, &claim)
		switch {
		case err != nil:
			counts["error: "+observe.ClassOf(err).String()]++
		case r.Outcome == fleetstore.OK:
			if err := store.Commit(hctx, claim); err != nil {
				counts["commit error: "+observe.ClassOf(err).String()]++
			}
			fallthrough
		default:
			name := r.Outcome.String()
			if r.Local {
				name += " (local)"
			}
			counts[name]++
		}
		span.End()
	}
	stats := store.FallbackStats()
	if err := tp.Shutdown(ctx); err != nil {
		return err
	}
	// The one collection, printed, while the Store is open: the degraded
	// mode's gauges are the open Store's.
	if err := mp.Shutdown(ctx); err != nil {
		return err
	}
	if err := store.Close(); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "otelbench: %d hooks on %s: %v; degraded mode: %+v\n",
		n, fleetstoreScheme(url), counts, stats)
	return nil
}

// fleetstoreScheme is url's scheme, for the summary (the URL may hold a password).
func fleetstoreScheme(url string) string {
	for i := 0; i+2 < len(url); i++ {
		if url[i:i+3] == "://" {
			return url[:i] + "://"
		}
	}
	return "the store"
}

// firstTraces exports the spans of the first max traces it sees, and of
// the first trace of each Hit outcome after them (rate_limited,
// duplicate, …), so that a run of hundreds of hooks prints a few traces,
// whole. A hook's spans end in order: the Store's, then its webhook span.
type firstTraces struct {
	sdktrace.SpanExporter
	mu       sync.Mutex
	max      int
	seen     map[trace.TraceID]bool
	outcomes map[string]bool
}

func (f *firstTraces) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	f.mu.Lock()
	if f.seen == nil {
		f.seen, f.outcomes = map[trace.TraceID]bool{}, map[string]bool{}
	}
	var keep []sdktrace.ReadOnlySpan
	for _, s := range spans {
		id := s.SpanContext().TraceID()
		outcome := ""
		for _, a := range s.Attributes() {
			if a.Key == fleetotel.OutcomeKey {
				outcome = a.Value.AsString()
			}
		}
		if !f.seen[id] && (len(f.seen) < f.max || outcome != "" && !f.outcomes[outcome]) {
			f.seen[id] = true
		}
		if f.seen[id] && outcome != "" {
			f.outcomes[outcome] = true
		}
		if f.seen[id] {
			keep = append(keep, s)
		}
	}
	f.mu.Unlock()
	if len(keep) == 0 {
		return nil
	}
	return f.SpanExporter.ExportSpans(ctx, keep)
}
