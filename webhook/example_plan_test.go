package webhook_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/webhook"
)

// Two plans through one handler: each tenant is charged its plan's
// limits, built once at start-up; OnDelivery is the access log, and
// names the tenant whose hooks cross 80 % of a burst.
func ExampleConfig_plan() {
	store, err := fleetstore.Open("memory://")
	if err != nil {
		panic(err)
	}
	defer store.Close()
	free := fleetstore.Plan{fleetstore.MustLimit(fleetstore.NewLimit(fleetstore.Hooks, 2, time.Hour, 2))}
	pro := fleetstore.Plan{
		fleetstore.MustLimit(fleetstore.NewLimit(fleetstore.Hooks, 100, time.Hour, 5)),
		fleetstore.MustLimit(fleetstore.NewByteLimit(fleetstore.Bytes, 1<<20, 8<<20)),
	}
	plans := map[string]fleetstore.Plan{"acme": pro, "tiny": free}
	h, err := webhook.New(webhook.Config{
		Store:    store,
		Provider: webhook.GitHub(),
		Secrets:  func(string) ([]string, error) { return []string{"It's a Secret to Everybody"}, nil },
		Tenant: func(r *http.Request, _ []byte) (string, error) {
			return strings.TrimPrefix(r.URL.Path, "/hooks/"), nil
		},
		Sink:      webhook.SinkFunc(func(context.Context, *webhook.Hook) error { return nil }),
		Plan:      func(tenant string) fleetstore.Plan { return plans[tenant] },
		NearLimit: 0.8,
		OnDelivery: func(d *webhook.Delivery) {
			fmt.Printf("%s %s %d %s %v\n", d.Tenant, d.EventID, d.Status, d.Outcome, d.NearLimit)
		},
	})
	if err != nil {
		panic(err)
	}
	for _, tenant := range []string{"tiny", "acme"} {
		for i := range 3 {
			body := fmt.Sprintf(`{"n":%d}`, i)
			mac := hmac.New(sha256.New, []byte("It's a Secret to Everybody"))
			mac.Write([]byte(body))
			r := httptest.NewRequest(http.MethodPost, "/hooks/"+tenant, strings.NewReader(body))
			r.Header.Set("X-GitHub-Delivery", fmt.Sprintf("%s-%d", tenant, i))
			r.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
			h.ServeHTTP(httptest.NewRecorder(), r)
		}
	}
	// Output:
	// tiny tiny-0 202 stored []
	// tiny tiny-1 202 stored [hooks]
	// tiny tiny-2 202 deferred []
	// acme acme-0 202 stored []
	// acme acme-1 202 stored []
	// acme acme-2 202 stored []
}
