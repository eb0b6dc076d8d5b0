package webhook_test

import (
	"net/http"
	"testing"

	"github.com/fleetstore/fleetstore"
	_ "github.com/fleetstore/fleetstore/drivers/redis"
	"github.com/fleetstore/fleetstore/internal/testing/testserver"
	"github.com/fleetstore/fleetstore/nettest"
	"github.com/fleetstore/fleetstore/webhook"
)

// TestEndToEndRedis: the handler's stories against a real redis-server.
func TestEndToEndRedis(t *testing.T) {
	srv := testserver.StartRedis(t)
	prefix := "webhook-" + randomEvent("")
	endToEnd(t, func(t *testing.T) *fleetstore.Store {
		st, err := fleetstore.Open(srv.URL() + "?timeout=2s&key_prefix=" + prefix)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	})
}

// TestStoreOutage: a store that refuses every call is 503 with
// Retry-After; with the degraded mode, the delivery is decided locally,
// stored, marked Local, and its commit queued.
func TestStoreOutage(t *testing.T) {
	url := "redis://" + nettest.RefusedAddr(t) + "?timeout=200ms"
	hooks := fleetstore.MustLimit(fleetstore.PerSecond(fleetstore.Hooks, 100, 200))

	down, err := fleetstore.Open(url)
	if err != nil {
		t.Fatal(err)
	}
	defer down.Close()
	e := newEdge(t, down, webhook.GitHub(), []fleetstore.Limit{hooks})
	a := e.send(e.delivery("acme", "g-1", "{}"))
	a.want(t, "store out, no fallback", http.StatusServiceUnavailable)
	if a.header.Get("Retry-After") != "5" || len(e.sink.events()) != 0 {
		t.Errorf("Retry-After %q, %d stored; want 5, none", a.header.Get("Retry-After"), len(e.sink.events()))
	}

	degraded, err := fleetstore.Open(url + "&fallback_nodes=4")
	if err != nil {
		t.Fatal(err)
	}
	defer degraded.Close()
	e = newEdge(t, degraded, webhook.GitHub(), []fleetstore.Limit{hooks})
	a = e.send(e.delivery("acme", "g-1", "{}"))
	a.want(t, "store out, degraded mode", http.StatusAccepted)
	if h := e.sink.last(); h == nil || !h.Local {
		t.Errorf("hook %+v, want it stored and Local", h)
	}
	// 200/4 = 50 at this node's share, one taken; the policy stays the
	// fleet's (the package doc's "Store outage" says what a sender sees).
	if got := a.header.Get("RateLimit"); got != `"hooks";r=49;t=1` {
		t.Errorf("RateLimit %q, want this node's share: r=49", got)
	}
	if got := a.header.Get("RateLimit-Policy"); got != `"hooks";q=200;w=2` {
		t.Errorf("RateLimit-Policy %q, want the fleet's: q=200", got)
	}
	if s := degraded.FallbackStats(); s.Queued != 1 {
		t.Errorf("stats %+v, want the commit queued", s)
	}
	e.send(e.delivery("acme", "g-1", "{}")).want(t, "the same delivery again, degraded", http.StatusOK)

	// Over this node's share (1/s burst 8 is 0.25/s burst 2 here):
	// Retry-After is this node's wait, 4s; t, in the fleet's units, says 1.
	slow := fleetstore.MustLimit(fleetstore.PerSecond(fleetstore.Hooks, 1, 8))
	e = newEdge(t, degraded, webhook.Stripe(0), []fleetstore.Limit{slow})
	var a429 answer
	for range 3 {
		ev := randomEvent("evt_")
		a429 = e.send(e.delivery("slow", ev, stripeEvent(ev)))
	}
	a429.want(t, "the third over this node's share of a burst of 8", http.StatusTooManyRequests)
	if a429.header.Get("Retry-After") != "4" || a429.header.Get("RateLimit") != `"hooks";r=0;t=1` ||
		a429.header.Get("RateLimit-Policy") != `"hooks";q=8;w=8` {
		t.Errorf("Retry-After %q, RateLimit %q, RateLimit-Policy %q; want 4, r=0;t=1, q=8;w=8",
			a429.header.Get("Retry-After"), a429.header.Get("RateLimit"), a429.header.Get("RateLimit-Policy"))
	}
}
