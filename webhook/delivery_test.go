package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/webhook"
	"github.com/fleetstore/fleetstore/webhook/webhooktest"
)

// delivered sends one GitHub delivery to a handler whose Sink takes sink
// to store it, and returns its Delivery.
func delivered(t *testing.T, sink time.Duration) *webhook.Delivery {
	t.Helper()
	var got *webhook.Delivery
	h, err := webhook.New(webhook.Config{
		Store:    openMemory(t),
		Provider: webhook.GitHub(),
		Secrets:  func(string) ([]string, error) { return []string{"s3cret"}, nil },
		Tenant:   func(*http.Request, []byte) (string, error) { return "acme", nil },
		Sink: webhook.SinkFunc(func(context.Context, *webhook.Hook) error {
			time.Sleep(sink)
			return nil
		}),
		Limits:     fleetstore.Plan{fleetstore.MustLimit(fleetstore.PerSecond(fleetstore.Hooks, 1, 2))},
		NearLimit:  0.4,
		OnDelivery: func(d *webhook.Delivery) { got = d },
	})
	if err != nil {
		t.Fatal(err)
	}
	r, err := webhooktest.GitHub(webhooktest.Delivery{URL: "http://127.0.0.1/hooks/acme",
		Body: []byte(`{"zen":"Half measures are as bad as nothing at all."}`), Secret: "s3cret", ID: "d-1"})
	if err != nil {
		t.Fatal(err)
	}
	h.ServeHTTP(httptest.NewRecorder(), r)
	if got == nil {
		t.Fatal("OnDelivery was not called")
	}
	return got
}

// TestDeliveryTotal: Total is the handler's whole time, at least the Sink's
// and the sum of the parts it measures.
func TestDeliveryTotal(t *testing.T) {
	t.Parallel()
	d := delivered(t, 20*time.Millisecond)
	if d.Outcome != webhook.Stored || d.Sink < 20*time.Millisecond {
		t.Fatalf("outcome %v, sink %v; want stored, the Sink's 20ms", d.Outcome, d.Sink)
	}
	if d.Total < d.Hit+d.Sink+d.Settle {
		t.Errorf("Total %v < Hit %v + Sink %v + Settle %v", d.Total, d.Hit, d.Sink, d.Settle)
	}
}

// TestDeliveryLogLine: a Delivery is one access-log line with slog and
// with zap, the same keys and values in both, those its doc lists; a
// field at its zero value is left out, but the five always there.
func TestDeliveryLogLine(t *testing.T) {
	t.Parallel()
	d := delivered(t, 0)
	d.Local, d.ShadowDenied = true, []fleetstore.Kind{fleetstore.Bytes} // as the degraded mode and a shadow limit set them
	d.OverQuota = []fleetstore.Kind{"hooks_month"}                      // as a quota sets it
	full := map[string]any{
		"provider": "github", "tenant": "acme", "event_id": "d-1", "hook_id": d.HookID,
		"status": 202.0, "outcome": "stored", "local": true,
		"near_limit": []any{"hooks"}, "over_quota": []any{"hooks_month"}, "shadow_denied": []any{"bytes"},
		"received": d.Received.Format(time.RFC3339Nano),
		"hit":      float64(d.Hit), "sink": float64(d.Sink), "settle": float64(d.Settle), "total": float64(d.Total),
	}
	if d.HookID == "" || d.Hit == 0 || d.Settle == 0 || len(d.NearLimit) != 1 {
		t.Fatalf("the delivery: %+v; want every field set", d)
	}
	zero := &webhook.Delivery{Provider: "github", Received: d.Received}
	bare := map[string]any{"provider": "github", "status": 0.0, "outcome": "outcome(0)",
		"received": d.Received.Format(time.RFC3339Nano), "total": 0.0}
	for _, tt := range []struct {
		d    *webhook.Delivery
		want map[string]any
	}{{d, full}, {zero, bare}} {
		for name, line := range map[string]map[string]any{
			"slog": slogLine(t, tt.d), "zap": zapLine(t, tt.d),
		} {
			if !reflect.DeepEqual(line, tt.want) {
				t.Errorf("%s: %v\nwant %v", name, line, tt.want)
			}
		}
	}
	// The doc's list of keys is the full line's.
	keys := []string{"provider", "tenant", "event_id", "hook_id", "status", "outcome", "local",
		"near_limit", "over_quota", "shadow_denied", "received", "hit", "sink", "settle", "total"}
	got := make([]string, 0, len(full))
	for _, a := range d.LogValue().Group() {
		got = append(got, a.Key)
	}
	if !slices.Equal(got, keys) {
		t.Errorf("keys %v, want the doc's %v", got, keys)
	}
}

// slogLine is d logged by slog's JSON handler as "delivery", decoded;
// durations in ns, as zap's JSON encoder writes them below.
func slogLine(t *testing.T, d *webhook.Delivery) map[string]any {
	t.Helper()
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("delivery", "delivery", d)
	var line struct{ Delivery map[string]any }
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("%s: %v", buf.Bytes(), err)
	}
	return line.Delivery
}

// zapLine is d logged by zap's JSON encoder as "delivery", decoded.
func zapLine(t *testing.T, d *webhook.Delivery) map[string]any {
	t.Helper()
	var buf bytes.Buffer
	cfg := zap.NewProductionEncoderConfig()
	cfg.EncodeTime = zapcore.RFC3339NanoTimeEncoder
	cfg.EncodeDuration = zapcore.NanosDurationEncoder
	core := zapcore.NewCore(zapcore.NewJSONEncoder(cfg), zapcore.AddSync(&buf), zap.InfoLevel)
	zap.New(core).Info("delivery", zap.Object("delivery", d))
	var line struct{ Delivery map[string]any }
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("%s: %v", buf.Bytes(), err)
	}
	return line.Delivery
}
