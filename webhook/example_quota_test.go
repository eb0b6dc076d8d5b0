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
	"github.com/fleetstore/fleetstore/calendar"
	"github.com/fleetstore/fleetstore/webhook"
)

// A plan of 10 hooks a second and 3 a month, the month of Berlin's
// calendar: the free plan drops what is over its quota, the pro plan
// keeps it, flagged for the bill (QuotaDefer, the default). OnDelivery
// names the quota a tenant is near (past 60 %) and the one it is over.
func ExampleConfig_quota() {
	store, err := fleetstore.Open("memory://")
	if err != nil {
		panic(err)
	}
	defer store.Close()
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		panic(err)
	}
	// Built once, at start-up.
	perSecond := fleetstore.MustLimit(fleetstore.PerSecond(fleetstore.Hooks, 10, 10))
	perMonth := fleetstore.MustLimit(fleetstore.NewQuota("hooks_month", 3, calendar.Month, berlin))
	plan := fleetstore.Plan{perSecond, perMonth}
	over := map[string]webhook.QuotaPolicy{"free": webhook.QuotaDrop, "pro": webhook.QuotaDefer}

	h, err := webhook.New(webhook.Config{
		Store:    store,
		Provider: webhook.GitHub(),
		Secrets:  func(string) ([]string, error) { return []string{"It's a Secret to Everybody"}, nil },
		Tenant: func(r *http.Request, _ []byte) (string, error) {
			return strings.TrimPrefix(r.URL.Path, "/hooks/"), nil
		},
		Sink: webhook.SinkFunc(func(_ context.Context, hook *webhook.Hook) error {
			if len(hook.OverQuota) > 0 {
				fmt.Printf("  stored %s, to bill: over %v\n", hook.EventID, hook.OverQuota)
			}
			return nil
		}),
		Limits: plan,
		OverQuota: func(tenant string, _ fleetstore.Kind) webhook.QuotaPolicy {
			return over[tenant]
		},
		NearLimit: 0.6,
		OnDelivery: func(d *webhook.Delivery) {
			fmt.Printf("%s %s %d %s near %v over %v\n", d.Tenant, d.EventID, d.Status, d.Outcome,
				d.NearLimit, d.OverQuota)
		},
	})
	if err != nil {
		panic(err)
	}
	for _, tenant := range []string{"free", "pro"} {
		for i := range 4 {
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
	// free free-0 202 stored near [] over []
	// free free-1 202 stored near [hooks_month] over []
	// free free-2 202 stored near [] over []
	// free free-3 202 dropped near [] over [hooks_month]
	// pro pro-0 202 stored near [] over []
	// pro pro-1 202 stored near [hooks_month] over []
	// pro pro-2 202 stored near [] over []
	//   stored pro-3, to bill: over [hooks_month]
	// pro pro-3 202 over_quota near [] over [hooks_month]
}
