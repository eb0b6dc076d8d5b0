package webhook_test

import (
	"net/http"
	"testing"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/calendar"
	"github.com/fleetstore/fleetstore/nettest"
	"github.com/fleetstore/fleetstore/webhook"
)

// TestOverQuotaDropLocal: while the store is out, a node decides a quota
// at its share of what was left (2 of 8 here, 4 nodes, no count seen).
// A drop quota must not drop a delivery on that estimate: the fleet's
// count may be far below n, and a drop cannot be undone. Past the share
// it is stored deferred (a provider that does not retry), not lost.
func TestOverQuotaDropLocal(t *testing.T) {
	st, err := fleetstore.Open("redis://" + nettest.RefusedAddr(t) + "?timeout=200ms&fallback_nodes=4")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	month := fleetstore.MustLimit(fleetstore.NewQuota("hooks_month", 8, calendar.Month, nil))
	plan := fleetstore.Plan{month}
	e := newEdge(t, st, webhook.GitHub(), plan, func(c *webhook.Config) {
		c.OverQuota = func(string, fleetstore.Kind) webhook.QuotaPolicy { return webhook.QuotaDrop }
	})
	for i := range 4 {
		ev := "drop-" + string(rune('a'+i))
		e.send(e.delivery("acme", ev, "{}")).want(t, ev, http.StatusAccepted)
		if h := e.sink.last(); h == nil || h.EventID != ev {
			t.Errorf("%s: the sink's last hook %+v; want it stored, 3 of the fleet's 8", ev, h)
		}
	}
}
