package fleetotel_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/fleetotel"
	"github.com/fleetstore/fleetstore/webhook"
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

// A webhook handler's deliveries and its Store's calls exported to
// Prometheus through OpenTelemetry's Prometheus exporter: a reader of the
// MeterProvider given to New, its registry served by promhttp. One event
// delivered twice is stored, then a duplicate; the scrape is filtered to
// two of the metrics.
func Example_prometheus() {
	reg := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		panic(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	defer mp.Shutdown(context.Background())
	obs, err := fleetotel.New(fleetotel.WithMeterProvider(mp))
	if err != nil {
		panic(err)
	}
	store, err := fleetstore.Open("memory://", fleetstore.WithObserver(obs))
	if err != nil {
		panic(err)
	}
	defer store.Close()
	const secret = "It's a Secret to Everybody"
	hooks, err := webhook.New(webhook.Config{
		Store:    store,
		Provider: webhook.GitHub(),
		Secrets:  func(string) ([]string, error) { return []string{secret}, nil },
		Tenant: func(r *http.Request, _ []byte) (string, error) {
			return strings.TrimPrefix(r.URL.Path, "/hooks/"), nil
		},
		Sink:       webhook.SinkFunc(func(context.Context, *webhook.Hook) error { return nil }),
		Limits:     fleetstore.Plan{fleetstore.MustLimit(fleetstore.PerSecond(fleetstore.Hooks, 10, 100))},
		OnDelivery: obs.ObserveDelivery,
	})
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/hooks/", hooks)
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))

	body := `{"zen":"Design for failure."}`
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(body))
	for range 2 {
		r := httptest.NewRequest(http.MethodPost, "/hooks/acme", strings.NewReader(body))
		r.Header.Set("X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958")
		r.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
		mux.ServeHTTP(httptest.NewRecorder(), r)
	}

	scrape := httptest.NewRecorder()
	mux.ServeHTTP(scrape, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	for line := range strings.Lines(scrape.Body.String()) {
		if strings.HasPrefix(line, "fleetstore_webhook_deliveries_total{") ||
			strings.HasPrefix(line, "fleetstore_client_hits_total{") {
			fmt.Print(line)
		}
	}
	// Output:
	// fleetstore_client_hits_total{db_system_name="memory",fleetstore_hit_outcome="duplicate",fleetstore_local="false",otel_scope_name="github.com/fleetstore/fleetstore/fleetotel",otel_scope_schema_url="https://opentelemetry.io/schemas/1.43.0",otel_scope_version=""} 1
	// fleetstore_client_hits_total{db_system_name="memory",fleetstore_hit_outcome="ok",fleetstore_local="false",otel_scope_name="github.com/fleetstore/fleetstore/fleetotel",otel_scope_schema_url="https://opentelemetry.io/schemas/1.43.0",otel_scope_version=""} 1
	// fleetstore_webhook_deliveries_total{fleetstore_local="false",fleetstore_webhook_outcome="duplicate",fleetstore_webhook_provider="github",http_response_status_code="200",otel_scope_name="github.com/fleetstore/fleetstore/fleetotel",otel_scope_schema_url="https://opentelemetry.io/schemas/1.43.0",otel_scope_version=""} 1
	// fleetstore_webhook_deliveries_total{fleetstore_local="false",fleetstore_webhook_outcome="stored",fleetstore_webhook_provider="github",http_response_status_code="202",otel_scope_name="github.com/fleetstore/fleetstore/fleetotel",otel_scope_schema_url="https://opentelemetry.io/schemas/1.43.0",otel_scope_version=""} 1
}
