package fleetotel_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/fleetotel"
	"github.com/fleetstore/fleetstore/webhook"
	"github.com/fleetstore/fleetstore/webhook/webhooktest"
)

// TestPrometheusNames: the package doc's table of the names as scraped is
// what a Prometheus scrape of every metric shows, name and type, no more
// and no less.
func TestPrometheusNames(t *testing.T) {
	reg := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	defer mp.Shutdown(context.Background())
	obs, err := fleetotel.New(fleetotel.WithMeterProvider(mp))
	if err != nil {
		t.Fatal(err)
	}
	store, err := fleetstore.Open("memory://prometheus-names", fleetstore.WithObserver(obs),
		fleetstore.WithFallback(fleetstore.Fallback{Nodes: 2}))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	const secret = "It's a Secret to Everybody"
	hooks, err := webhook.New(webhook.Config{
		Store:    store,
		Provider: webhook.GitHub(),
		Secrets:  func(string) ([]string, error) { return []string{secret}, nil },
		Tenant:   func(*http.Request, []byte) (string, error) { return "acme", nil },
		Sink:     webhook.SinkFunc(func(context.Context, *webhook.Hook) error { return nil }),
		Limits: fleetstore.Plan{fleetstore.MustLimit(
			fleetstore.NewLimit(fleetstore.Hooks, 1, time.Hour, 1))},
		NearLimit:  0.5,
		OnDelivery: obs.ObserveDelivery,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(hooks)
	defer srv.Close()
	for range 2 { // stored, near the limit; then denied, deferred
		r, err := webhooktest.GitHub(webhooktest.Delivery{URL: srv.URL, Body: []byte(`{}`), Secret: secret})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := srv.Client().Do(r)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	store.Ping(cancelled) // an error

	scrape := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(scrape, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	var scraped []string
	for line := range strings.Lines(scrape.Body.String()) {
		if f := strings.Fields(line); len(f) == 4 && f[1] == "TYPE" {
			scraped = append(scraped, f[2]+" "+f[3])
		}
	}
	sort.Strings(scraped)

	documented := prometheusTable(t)
	sort.Strings(documented)
	if strings.Join(scraped, "\n") != strings.Join(documented, "\n") {
		t.Errorf("scraped:\n%s\n\nthe package doc's table:\n%s", strings.Join(scraped, "\n"), strings.Join(documented, "\n"))
	}
}

// prometheusTable is the package doc's table of the names as scraped:
// "name type" per row.
func prometheusTable(t *testing.T) []string {
	t.Helper()
	src, err := os.ReadFile("fleetotel.go")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(src), "// # Prometheus\n")
	if !ok {
		t.Fatal(`fleetotel.go has no "# Prometheus" section`)
	}
	section, _, _ = strings.Cut(section, "\n// #")
	cols := regexp.MustCompile(` {2,}`)
	var rows []string
	header := true
	for line := range strings.Lines(section) {
		row, ok := strings.CutPrefix(strings.TrimRight(line, "\n "), "//\t")
		if !ok {
			continue
		}
		if header {
			header = false
			continue
		}
		f := cols.Split(row, -1)
		if len(f) != 3 {
			t.Fatalf("the table's row %q: %d columns, want 3", row, len(f))
		}
		rows = append(rows, f[1]+" "+f[2])
	}
	return rows
}
