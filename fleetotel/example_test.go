package fleetotel_test

import (
	"context"
	"fmt"
	"sort"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/fleetotel"
)

// A Store observed by fleetotel on the SDK's meter: five hooks of one
// tenant allowed a burst of three, read back as fleetstore.client.hits by
// outcome. A program passes its own providers (or sets the global ones)
// and an exporter instead of the ManualReader.
func ExampleNew() {
	reader := sdkmetric.NewManualReader()
	obs, err := fleetotel.New(fleetotel.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))))
	if err != nil {
		panic(err)
	}
	store, err := fleetstore.Open("memory://example-fleetotel", fleetstore.WithObserver(obs))
	if err != nil {
		panic(err)
	}
	defer store.Close()
	hooks := fleetstore.MustLimit(fleetstore.PerSecond(fleetstore.Hooks, 1, 3))
	for i := range 5 {
		claim := fleetstore.Claim{Tenant: "acme", SourceID: "github", Key: fmt.Sprint("delivery-", i), HookID: fmt.Sprint("hook-", i), TTL: time.Hour, PendingTTL: time.Minute}
		if _, err := store.Hit(context.Background(), []fleetstore.Charge{hooks.Charge("acme", 1)}, &claim); err != nil {
			panic(err)
		}
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		panic(err)
	}
	var lines []string
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if sum, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == "fleetstore.client.hits" {
				for _, p := range sum.DataPoints {
					outcome, _ := p.Attributes.Value("fleetstore.hit.outcome")
					system, _ := p.Attributes.Value("db.system.name")
					lines = append(lines, fmt.Sprintf("%s %s=%s: %d", m.Name, system.AsString(), outcome.AsString(), p.Value))
				}
			}
		}
	}
	sort.Strings(lines)
	for _, l := range lines {
		fmt.Println(l)
	}
	// Output:
	// fleetstore.client.hits memory=ok: 3
	// fleetstore.client.hits memory=rate_limited: 2
}
