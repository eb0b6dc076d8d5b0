package fleetotel_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/fleetotel"
	"github.com/fleetstore/fleetstore/webhook"
)

const hookSecret = "whsec_fleetotel"

// signed is a delivery of body for provider (github or stripe), signed
// with hookSecret at at, as the provider's sender signs it.
func signed(provider, tenant, event, body string, at time.Time) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/hooks/"+tenant, strings.NewReader(body))
	mac := hmac.New(sha256.New, []byte(hookSecret))
	switch provider {
	case "github":
		mac.Write([]byte(body))
		r.Header.Set("X-GitHub-Delivery", event)
		r.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	case "stripe":
		ts := strconv.FormatInt(at.Unix(), 10)
		mac.Write([]byte(ts + "." + body))
		r.Header.Set("Stripe-Signature", "t="+ts+",v1="+hex.EncodeToString(mac.Sum(nil)))
	}
	return r
}

// hookEnv is a handler's Config on store, its deliveries' tenant taken
// from the path, each given a hook id of its own.
func hookEnv(store *fleetstore.Store, p webhook.Provider, now time.Time,
	onDelivery func(*webhook.Delivery)) webhook.Config {
	var ids atomic.Int64
	return webhook.Config{
		Store:    store,
		Provider: p,
		Secrets:  func(string) ([]string, error) { return []string{hookSecret}, nil },
		Tenant: func(r *http.Request, _ []byte) (string, error) {
			return strings.TrimPrefix(r.URL.Path, "/hooks/"), nil
		},
		Sink: webhook.SinkFunc(func(context.Context, *webhook.Hook) error { return nil }),
		NewHookID: func() string {
			return fmt.Sprintf("hook-%s-%s-%d", identity, p.Name(), ids.Add(1))
		},
		Now:        func() time.Time { return now },
		OnDelivery: onDelivery,
	}
}

// identity marks every tenant, event id and hook id of the deliveries
// below, so that the metrics can be searched for them.
const identity = "zq7id"

// TestDeliveries: deliveries through a GitHub and a Stripe handler on
// memory://, and one on a Store out (degraded mode), show in
// fleetstore.webhook.deliveries by provider, status, outcome and
// fleetstore.local, in fleetstore.webhook.near_limit by provider and
// kind, and the Sinks in fleetstore.webhook.sink.duration; no point
// holds a tenant, event id or hook id, and no attribute but those.
func TestDeliveries(t *testing.T) {
	s := newSDK(t)
	store, err := fleetstore.Open("memory://fleetotel-deliveries", fleetstore.WithObserver(s.obs))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	now := time.Now()
	var mu sync.Mutex
	var seen []webhook.Delivery // as the handlers reported them
	record := func(d *webhook.Delivery) {
		mu.Lock()
		seen = append(seen, *d)
		mu.Unlock()
		s.obs.ObserveDelivery(d) // called from the application's own OnDelivery
	}
	tenant, evt := "acme-"+identity, func(i int) string { return fmt.Sprintf("evt-%s-%d", identity, i) }

	// GitHub (no retries): a burst of 3 hooks, near the limit past half.
	cfg := hookEnv(store, webhook.GitHub(), now, record)
	cfg.Limits = fleetstore.Plan{fleetstore.MustLimit(fleetstore.NewLimit(fleetstore.Hooks, 1, time.Hour, 3))}
	cfg.NearLimit = 0.5
	gh, err := webhook.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	body := func(i int) string { return fmt.Sprintf(`{"n":%d}`, i) }
	forged := signed("github", "evil-"+identity, evt(9), body(9), now)
	forged.Header.Set("X-Hub-Signature-256", "sha256="+strings.Repeat("0", 64))
	for _, tt := range []struct {
		r    *http.Request
		want int
	}{
		{signed("github", tenant, evt(1), body(1), now), 202}, // stored
		{signed("github", tenant, evt(2), body(2), now), 202}, // stored, 1 hook left of 3: near
		{signed("github", tenant, evt(1), body(1), now), 200}, // duplicate
		{signed("github", tenant, evt(3), body(3), now), 202}, // stored, none left: no new crossing
		{signed("github", tenant, evt(4), body(4), now), 202}, // deferred
		{forged, 401},
		{httptest.NewRequest(http.MethodGet, "/hooks/"+tenant, nil), 405},
	} {
		w := httptest.NewRecorder()
		gh.ServeHTTP(w, tt.r)
		if w.Code != tt.want {
			t.Fatalf("github delivery: %d %s, want %d", w.Code, w.Body, tt.want)
		}
	}

	// Stripe (retries), another tenant: a burst of 2 hooks and of 3 bodies' bytes, near
	// the limit past half: the second delivery crosses both.
	event := func(i int) string { return `{"id":"` + evt(i) + `","object":"event"}` }
	cfg = hookEnv(store, webhook.Stripe(0), now, s.obs.ObserveDelivery) // OnDelivery as it is
	cfg.Plan = func(string) fleetstore.Plan {
		return fleetstore.Plan{
			fleetstore.MustLimit(fleetstore.NewLimit(fleetstore.Hooks, 1, time.Hour, 2)),
			fleetstore.MustLimit(fleetstore.NewByteLimit(fleetstore.Bytes, 1, int64(3*len(event(1))))),
		}
	}
	cfg.NearLimit = 0.5
	st, err := webhook.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []int{202, 202, 429} {
		w := httptest.NewRecorder()
		st.ServeHTTP(w, signed("stripe", "beta-"+identity, "", event(i+1), now))
		if w.Code != want {
			t.Fatalf("stripe delivery %d: %d %s, want %d", i+1, w.Code, w.Body, want)
		}
	}

	// A Store out: the degraded mode stores the delivery, decided locally.
	out, err := fleetstore.Open(deadRedis(t, "fallback_nodes=1"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cfg = hookEnv(out, webhook.GitHub(), now, record)
	degraded, err := webhook.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	degraded.ServeHTTP(w, signed("github", tenant, evt(5), body(5), now))
	if w.Code != 202 {
		t.Fatalf("github delivery on a Store out: %d %s, want 202", w.Code, w.Body)
	}

	rm := s.collect(t)
	const deliveries = "fleetstore.webhook.deliveries"
	github, stripe := provider("github"), provider("stripe")
	for _, tt := range []struct {
		want []attribute.KeyValue
		n    int64
	}{
		{[]attribute.KeyValue{github, status(202), hookOutcome("stored"), local(false)}, 3},
		{[]attribute.KeyValue{github, status(202), hookOutcome("stored"), local(true)}, 1},
		{[]attribute.KeyValue{github, status(200), hookOutcome("duplicate")}, 1},
		{[]attribute.KeyValue{github, status(202), hookOutcome("deferred")}, 1},
		{[]attribute.KeyValue{github, status(401), hookOutcome("forged"), local(false)}, 1},
		{[]attribute.KeyValue{github, status(405), hookOutcome("not_post")}, 1},
		{[]attribute.KeyValue{github}, 8},
		{[]attribute.KeyValue{stripe, status(202), hookOutcome("stored"), local(false)}, 2},
		{[]attribute.KeyValue{stripe, status(429), hookOutcome("rate_limited"), local(false)}, 1},
		{[]attribute.KeyValue{stripe}, 3},
		{[]attribute.KeyValue{attribute.String("deployment.environment.name", "test")}, 11},
	} {
		if n := sum(t, rm, deliveries, tt.want...); n != tt.n {
			t.Errorf("%s with %v: %d, want %d", deliveries, tt.want, n, tt.n)
		}
	}
	for _, tt := range []struct {
		want []attribute.KeyValue
		n    int64
	}{
		{[]attribute.KeyValue{github, bucketKind("hooks")}, 1},
		{[]attribute.KeyValue{stripe, bucketKind("hooks")}, 1},
		{[]attribute.KeyValue{stripe, bucketKind("bytes")}, 1},
		{nil, 3},
	} {
		if n := sum(t, rm, "fleetstore.webhook.near_limit", tt.want...); n != tt.n {
			t.Errorf("near_limit with %v: %d, want %d", tt.want, n, tt.n)
		}
	}
	// The handlers' own reports, for what the test cannot fix in advance:
	// each one's status, and whose Sink ran.
	sinks := 0
	for _, d := range seen {
		if d.Tenant == "" && d.Outcome != webhook.NotPost {
			t.Errorf("delivery %+v: no tenant", d)
		}
		if d.Sink > 0 {
			sinks++
		}
	}
	if len(seen) != 8 || sinks != 5 {
		t.Errorf("%d deliveries reported, %d with a Sink; want 8 and 5", len(seen), sinks)
	}
	m := find(rm, "fleetstore.webhook.sink.duration")
	if m == nil || m.Unit != "s" {
		t.Fatalf("fleetstore.webhook.sink.duration: %+v, want a histogram in s", m)
	}
	var sunk uint64
	for _, p := range m.Data.(metricdata.Histogram[float64]).DataPoints {
		sunk += p.Count
		if !has(p.Attributes, hookOutcome("stored")) && !has(p.Attributes, hookOutcome("deferred")) {
			t.Errorf("a Sink recorded for a delivery %v", p.Attributes.ToSlice())
		}
	}
	if sunk != uint64(sinks)+2 { // and the two Stripe hooks stored
		t.Errorf("%d Sinks recorded, want %d", sunk, sinks+2)
	}

	if dump := fmt.Sprintf("%+v", rm); strings.Contains(dump, identity) {
		t.Errorf("metrics hold a tenant, event id or hook id: %s", dump)
	}
	allowed := []attribute.Key{"deployment.environment.name", "http.response.status_code",
		fleetotel.ProviderKey, fleetotel.DeliveryOutcomeKey, fleetotel.LocalKey, fleetotel.KindKey}
	for _, name := range []string{deliveries, "fleetstore.webhook.near_limit"} {
		for _, p := range find(rm, name).Data.(metricdata.Sum[int64]).DataPoints {
			for _, kv := range p.Attributes.ToSlice() {
				if !slices.Contains(allowed, kv.Key) {
					t.Errorf("%s: attribute %s=%s", name, kv.Key, kv.Value.String())
				}
			}
		}
	}
	// The Store's own metrics go on beside them: 5 GitHub and 3 Stripe
	// deliveries charged (not the 405 nor the 401), and the two denied
	// ones' second Hit, the claim alone.
	if n := sum(t, rm, "fleetstore.client.hits", system("memory")); n != 10 {
		t.Errorf("fleetstore.client.hits: %d, want 10", n)
	}
}

// TestDeliveryCaps: the webhook metrics tell MaxProviders providers and,
// per provider, MaxKinds near-limit kinds apart, the rest "_OTHER"; a
// Delivery made by hand with another status than the handler's for its
// outcome is counted with its own; a nil Observer, one not made by New,
// or a nil Delivery records nothing.
func TestDeliveryCaps(t *testing.T) {
	s := newSDK(t)
	const extra = 3
	for i := range fleetotel.MaxProviders + extra {
		d := &webhook.Delivery{Provider: fmt.Sprint("p", i), Status: 202, Outcome: webhook.Stored}
		s.obs.ObserveDelivery(d)
		s.obs.ObserveDelivery(d) // a provider seen again is the same point
	}
	var kinds []fleetstore.Kind
	for i := range fleetotel.MaxKinds + extra {
		kinds = append(kinds, fleetstore.Kind(fmt.Sprint("k", i)))
	}
	s.obs.ObserveDelivery(&webhook.Delivery{Provider: "p0", Status: 202, Outcome: webhook.Stored, NearLimit: kinds})
	s.obs.ObserveDelivery(&webhook.Delivery{Provider: "p0", Status: 299, Outcome: webhook.Stored})
	var nilObs *fleetotel.Observer
	nilObs.ObserveDelivery(&webhook.Delivery{Provider: "p0"})
	new(fleetotel.Observer).ObserveDelivery(&webhook.Delivery{Provider: "p0"})
	s.obs.ObserveDelivery(nil)

	rm := s.collect(t)
	const deliveries = "fleetstore.webhook.deliveries"
	points := find(rm, deliveries).Data.(metricdata.Sum[int64]).DataPoints
	if len(points) != fleetotel.MaxProviders+2 {
		t.Errorf("%d delivery points, want %d providers, _OTHER and p0's 299", len(points), fleetotel.MaxProviders+2)
	}
	for _, tt := range []struct {
		want []attribute.KeyValue
		n    int64
	}{
		{[]attribute.KeyValue{provider("_OTHER")}, 2 * extra},
		{[]attribute.KeyValue{provider("p0"), status(202)}, 3},
		{[]attribute.KeyValue{provider("p0"), status(299), hookOutcome("stored")}, 1},
		{[]attribute.KeyValue{provider("p1")}, 2},
	} {
		if n := sum(t, rm, deliveries, tt.want...); n != tt.n {
			t.Errorf("%s with %v: %d, want %d", deliveries, tt.want, n, tt.n)
		}
	}
	near := find(rm, "fleetstore.webhook.near_limit").Data.(metricdata.Sum[int64]).DataPoints
	if len(near) != fleetotel.MaxKinds+1 {
		t.Errorf("%d near-limit points, want %d kinds and _OTHER", len(near), fleetotel.MaxKinds)
	}
	if n := sum(t, rm, "fleetstore.webhook.near_limit", provider("p0"), bucketKind("_OTHER")); n != extra {
		t.Errorf("_OTHER: %d crossings, want %d", n, extra)
	}
	if n := sum(t, rm, "fleetstore.webhook.near_limit", provider("p0"), bucketKind("k0")); n != 1 {
		t.Errorf("k0: %d crossings, want 1", n)
	}
}

func provider(p string) attribute.KeyValue { return attribute.String("fleetstore.webhook.provider", p) }
func hookOutcome(o string) attribute.KeyValue {
	return attribute.String("fleetstore.webhook.outcome", o)
}
func status(c int) attribute.KeyValue { return attribute.Int("http.response.status_code", c) }
