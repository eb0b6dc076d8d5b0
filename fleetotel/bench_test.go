package fleetotel_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/fleetotel"
	"github.com/fleetstore/fleetstore/observe"
	"github.com/fleetstore/fleetstore/webhook"
)

// BenchmarkHit is the root package's BenchmarkHit/single (a memory Hit:
// a hooks and a bytes charge and a claim on a fresh event key, every one
// OK) without an observer, with one that does nothing, and with this
// package's on no-op providers, on the SDK's meter alone (a ManualReader
// never collected, spans off) and on the SDK's meter and tracer (every
// span sampled and ended, exported nowhere). Compare the variants of one
// run as ratios.
func BenchmarkHit(b *testing.B) {
	otelObs := func(b *testing.B, opts ...fleetotel.Option) observe.Observer {
		o, err := fleetotel.New(opts...)
		if err != nil {
			b.Fatal(err)
		}
		return o
	}
	for _, v := range []struct {
		name string
		obs  func(b *testing.B) observe.Observer
	}{
		{"observer=none", func(*testing.B) observe.Observer { return nil }},
		{"observer=nop", func(*testing.B) observe.Observer { return nopObserver{} }},
		{"otel=noop", func(b *testing.B) observe.Observer {
			return otelObs(b, fleetotel.WithMeterProvider(metricnoop.NewMeterProvider()), fleetotel.WithTracerProvider(tracenoop.NewTracerProvider()))
		}},
		{"otel=sdk-metrics", func(b *testing.B) observe.Observer {
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
			b.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
			return otelObs(b, fleetotel.WithMeterProvider(mp), fleetotel.WithTracerProvider(tracenoop.NewTracerProvider()))
		}},
		{"otel=sdk", func(b *testing.B) observe.Observer {
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
			tp := sdktrace.NewTracerProvider()
			b.Cleanup(func() { _ = mp.Shutdown(context.Background()); _ = tp.Shutdown(context.Background()) })
			return otelObs(b, fleetotel.WithMeterProvider(mp), fleetotel.WithTracerProvider(tp))
		}},
	} {
		b.Run(v.name, func(b *testing.B) {
			var opts []fleetstore.Option
			if o := v.obs(b); o != nil {
				opts = append(opts, fleetstore.WithObserver(o))
			}
			store, err := fleetstore.Open("memory://", opts...)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { store.Close() })
			benchHits(b, store)
		})
	}
}

type nopObserver struct{}

func (nopObserver) Observe(context.Context, observe.Event) {}

var benchRun atomic.Int64

func benchHits(b *testing.B, store *fleetstore.Store) {
	run := strconv.FormatInt(benchRun.Add(1), 10)
	keys := make([]string, b.N)
	for i := range keys {
		keys[i] = "evt-" + run + "-" + strconv.Itoa(i) + "-5f0c-4a1e-9b1d-3c2a"
	}
	tenants := make([]string, 1024)
	for i := range tenants {
		tenants[i] = "tenant-" + strconv.Itoa(i)
	}
	charges := []fleetstore.Charge{
		{Kind: fleetstore.Hooks, Increment: time.Microsecond, Capacity: time.Hour},
		{Kind: fleetstore.Bytes, Increment: 4 * time.Microsecond, Capacity: time.Hour},
	}
	claim := &fleetstore.Claim{SourceID: "github", HookID: "hook-1", Node: "bench", TTL: 24 * time.Hour, PendingTTL: time.Millisecond}
	ctx := context.Background()
	notOK := 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t := tenants[i%len(tenants)]
		charges[0].Tenant, charges[1].Tenant, claim.Tenant, claim.Key = t, t, t, keys[i]
		res, err := store.Hit(ctx, charges, claim)
		if err != nil {
			b.Fatal(err)
		}
		if res.Outcome != fleetstore.OK {
			notOK++
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(notOK)/float64(b.N), "notok/op")
}

// BenchmarkObserve is the Observer's own cost per call, without a Store:
// Observe of a decided Hit's Event (OK, or rate-limited by its hooks
// charge) on no-op providers, the SDK's meter, and the SDK's meter and
// tracer.
func BenchmarkObserve(b *testing.B) {
	events := map[string]observe.Event{
		"hit=ok":           {Op: observe.OpHit, Start: time.Now(), Duration: 700 * time.Nanosecond, Outcome: fleetstore.OK, Charges: 2, Claims: 1},
		"hit=rate_limited": {Op: observe.OpHit, Start: time.Now(), Duration: 700 * time.Nanosecond, Outcome: fleetstore.RateLimited, Charges: 2, Claims: 1, NDenied: 1, Denied: [fleetstore.MaxCharges]fleetstore.Kind{fleetstore.Hooks}},
	}
	for _, p := range []struct {
		name string
		opts func(b *testing.B) []fleetotel.Option
	}{
		{"otel=noop", func(*testing.B) []fleetotel.Option {
			return []fleetotel.Option{fleetotel.WithMeterProvider(metricnoop.NewMeterProvider()), fleetotel.WithTracerProvider(tracenoop.NewTracerProvider())}
		}},
		{"otel=sdk-metrics", func(b *testing.B) []fleetotel.Option {
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
			b.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
			return []fleetotel.Option{fleetotel.WithMeterProvider(mp), fleetotel.WithTracerProvider(tracenoop.NewTracerProvider())}
		}},
		{"otel=sdk", func(b *testing.B) []fleetotel.Option {
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
			tp := sdktrace.NewTracerProvider()
			b.Cleanup(func() { _ = mp.Shutdown(context.Background()); _ = tp.Shutdown(context.Background()) })
			return []fleetotel.Option{fleetotel.WithMeterProvider(mp), fleetotel.WithTracerProvider(tp)}
		}},
	} {
		for _, ev := range []string{"hit=ok", "hit=rate_limited"} {
			b.Run(p.name+"/"+ev, func(b *testing.B) {
				o, err := fleetotel.New(p.opts(b)...)
				if err != nil {
					b.Fatal(err)
				}
				if err := o.Attach(observe.StoreInfo{Scheme: "memory"}); err != nil {
					b.Fatal(err)
				}
				e, ctx := events[ev], context.Background()
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					o.Observe(ctx, e)
				}
			})
		}
	}
}

// BenchmarkObserveDelivery is ObserveDelivery's cost per delivery: a
// stored one, and one that crossed a near-limit mark, on no-op providers
// and on the SDK's meter.
func BenchmarkObserveDelivery(b *testing.B) {
	deliveries := map[string]*webhook.Delivery{
		"stored": {Tenant: "acme", Provider: "github", EventID: "evt-1", HookID: "hook-1", Status: 202,
			Outcome: webhook.Stored, Hit: 700 * time.Nanosecond, Sink: time.Millisecond},
		"near_limit": {Tenant: "acme", Provider: "github", EventID: "evt-1", HookID: "hook-1", Status: 202,
			Outcome: webhook.Stored, NearLimit: []fleetstore.Kind{fleetstore.Hooks}, Sink: time.Millisecond},
	}
	for _, p := range []struct {
		name string
		mp   func(b *testing.B) fleetotel.Option
	}{
		{"otel=noop", func(*testing.B) fleetotel.Option {
			return fleetotel.WithMeterProvider(metricnoop.NewMeterProvider())
		}},
		{"otel=sdk-metrics", func(b *testing.B) fleetotel.Option {
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
			b.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
			return fleetotel.WithMeterProvider(mp)
		}},
	} {
		for _, dn := range []string{"stored", "near_limit"} {
			b.Run(p.name+"/"+dn, func(b *testing.B) {
				o, err := fleetotel.New(p.mp(b), fleetotel.WithTracerProvider(tracenoop.NewTracerProvider()))
				if err != nil {
					b.Fatal(err)
				}
				d := deliveries[dn]
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					o.ObserveDelivery(d)
				}
			})
		}
	}
}
