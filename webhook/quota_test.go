package webhook_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	_ "time/tzdata" // Europe/Berlin, whatever the machine has installed

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/calendar"
	"github.com/fleetstore/fleetstore/drivers/memory"
	"github.com/fleetstore/fleetstore/nettest"
	"github.com/fleetstore/fleetstore/webhook"
)

// quotaEdge is an edge whose memory store and handler read one clock the
// test moves, on a plan of 10 hooks a second and 3 a month in
// Europe/Berlin, under policy (nil: Config.OverQuota unset), with
// NearLimit 0.5. The clock starts at 31 January 2027 23:00 in Berlin:
// the month ends an hour later.
type quotaEdge struct {
	*edge
	st    *fleetstore.Store
	now   atomic.Int64 // µs
	month fleetstore.Limit
	mu    sync.Mutex
	got   []webhook.Delivery
}

const monthEnds = 3600 // seconds from the start to 1 February 00:00 in Berlin

func newQuotaEdge(t *testing.T, p webhook.Provider, policy *webhook.QuotaPolicy) *quotaEdge {
	t.Helper()
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	q := &quotaEdge{month: fleetstore.MustLimit(fleetstore.NewQuota("hooks_month", 3, calendar.Month, berlin))}
	q.now.Store(time.Date(2027, 1, 31, 23, 0, 0, 0, berlin).UnixMicro())
	q.st, err = fleetstore.OpenDriver(memory.New(q.now.Load), "memory://")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.st.Close() })
	plan := fleetstore.Plan{fleetstore.MustLimit(fleetstore.PerSecond(fleetstore.Hooks, 10, 10)), q.month}
	q.edge = newEdge(t, q.st, p, plan, func(c *webhook.Config) {
		c.Now = q.clock
		c.NearLimit = 0.5
		if policy != nil {
			c.OverQuota = func(tenant string, kind fleetstore.Kind) webhook.QuotaPolicy {
				if tenant != "acme" || kind != "hooks_month" {
					t.Errorf("OverQuota asked for %q's %q", tenant, kind)
				}
				return *policy
			}
		}
		c.OnDelivery = func(d *webhook.Delivery) {
			q.mu.Lock()
			defer q.mu.Unlock()
			q.got = append(q.got, *d)
		}
	})
	return q
}

func (q *quotaEdge) clock() time.Time { return time.UnixMicro(q.now.Load()) }

// send delivers event to acme, signed at the test's clock, and returns
// the answer and the Delivery OnDelivery was handed.
func (q *quotaEdge) send(event string) (answer, webhook.Delivery) {
	q.t.Helper()
	body := "{}"
	if q.p.Name() == "stripe" {
		body = stripeEvent(event)
	}
	req, err := http.NewRequest(http.MethodPost, q.srv.URL+"/hooks/acme", strings.NewReader(body))
	if err != nil {
		q.t.Fatal(err)
	}
	sign(req.Header, q.p.Name(), event, body, secret, q.clock())
	a := q.edge.send(req)
	q.mu.Lock()
	defer q.mu.Unlock()
	return a, q.got[len(q.got)-1]
}

// fill sends the month's 3 hooks, each stored, and checks that the 2nd,
// whose count crosses 0.5 × 3, is the one named near the quota.
func (q *quotaEdge) fill(t *testing.T) {
	t.Helper()
	for i, ev := range []string{"evt_1", "evt_2", "evt_3"} {
		a, d := q.send(ev)
		a.want(t, ev, http.StatusAccepted)
		if d.Outcome != webhook.Stored || d.OverQuota != nil {
			t.Errorf("%s: %v over %v, want stored, over none", ev, d.Outcome, d.OverQuota)
		}
		if near := slices.Contains(d.NearLimit, "hooks_month"); near != (i == 1) {
			t.Errorf("%s: NearLimit %v; the 2nd of 3 crosses 0.5 × 3, once", ev, d.NearLimit)
		}
	}
}

// overQuota checks that d and the stored hook (when hook is not nil)
// name the month's quota as the one the delivery is over.
func overQuota(t *testing.T, what string, d webhook.Delivery, hook *webhook.Hook) {
	t.Helper()
	want := []fleetstore.Kind{"hooks_month"}
	if !slices.Equal(d.OverQuota, want) {
		t.Errorf("%s: Delivery.OverQuota %v, want %v", what, d.OverQuota, want)
	}
	if hook != nil && !slices.Equal(hook.OverQuota, want) {
		t.Errorf("%s: Hook.OverQuota %v, want %v", what, hook.OverQuota, want)
	}
}

// TestOverQuotaDefer: the default. A delivery over the month's quota is
// stored with Hook.OverQuota, answered 202 (the outcome over_quota), and
// the quota, charged as a shadow, never denies: the per-second limit
// still refuses a flood with its own 1s wait, not the month's hour; the
// quota's count goes on past n, for billing. After the month's end the
// count starts over.
func TestOverQuotaDefer(t *testing.T) {
	q := newQuotaEdge(t, webhook.Stripe(0), nil)
	q.fill(t)
	for _, ev := range []string{"evt_4", "evt_5"} {
		a, d := q.send(ev)
		a.want(t, ev+" over the quota", http.StatusAccepted)
		if d.Outcome != webhook.OverQuota || d.Outcome.String() != "over_quota" {
			t.Errorf("%s: outcome %v, want over_quota", ev, d.Outcome)
		}
		overQuota(t, ev, d, q.sink.last())
		if q.sink.last().EventID != ev || q.sink.last().Deferred {
			t.Errorf("%s: the sink's last hook %+v, want %s, not Deferred", ev, q.sink.last(), ev)
		}
		if got, want := a.header.Get("RateLimit"), `"hooks";r=`; !strings.HasPrefix(got, want) ||
			!strings.HasSuffix(got, `"hooks_month";r=0;t=3600`) {
			t.Errorf("%s: RateLimit %q, want the quota at r=0, t=3600", ev, got)
		}
	}
	// The burst of 10 a second: 5 taken, 5 more, then a 429 of the
	// per-second limit's wait.
	for i := range 6 {
		a, _ := q.send("evt_flood_" + string(rune('a'+i)))
		if i < 5 {
			a.want(t, "the flood within the burst", http.StatusAccepted)
			continue
		}
		a.want(t, "the 11th hook in one second", http.StatusTooManyRequests)
		if ra := a.header.Get("Retry-After"); ra != "1" {
			t.Errorf("the flood's 429: Retry-After %q, want 1 (the per-second limit's, not the month's)", ra)
		}
	}
	// The count went on past n: 10 hooks counted, the 11th refused by
	// its bucket counted nothing; one more shadow unit makes 11.
	res, err := q.st.Hit(context.Background(),
		[]fleetstore.Charge{q.month.Shadow().ChargeAt("acme", 1, q.clock())}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if used := res.Quota()[0].Used; used != 11 {
		t.Errorf("the month's count after 10 deliveries and one unit: %d, want 11", used)
	}

	q.now.Add(monthEnds * 1e6)
	a, d := q.send("evt_february")
	a.want(t, "the first hook of February", http.StatusAccepted)
	if d.Outcome != webhook.Stored || d.OverQuota != nil || !strings.Contains(a.header.Get("RateLimit"), `"hooks_month";r=2;`) {
		t.Errorf("February's first: %v over %v, RateLimit %q; want stored, r=2", d.Outcome, d.OverQuota,
			a.header.Get("RateLimit"))
	}
}

// TestOverQuotaRefuse: a delivery over a quota that refuses is 429 with a
// Retry-After to the month's end, its claim released, so that the
// provider's retry after the end is stored; a redelivery of a stored
// event is still 200. A provider that does not retry gets its hook
// stored with Hook.Deferred, never lost.
func TestOverQuotaRefuse(t *testing.T) {
	refuse := webhook.QuotaRefuse
	q := newQuotaEdge(t, webhook.Stripe(0), &refuse)
	q.fill(t)
	a, d := q.send("evt_4")
	a.want(t, "over the quota", http.StatusTooManyRequests)
	if ra := a.header.Get("Retry-After"); ra != "3600" || d.Outcome != webhook.RateLimited {
		t.Errorf("over the quota: Retry-After %q, %v; want 3600 (the month's end), rate_limited", ra, d.Outcome)
	}
	overQuota(t, "over the quota", d, nil)
	a, d = q.send("evt_2")
	a.want(t, "a redelivery of a stored event over the quota", http.StatusOK)
	if d.Outcome != webhook.Duplicate {
		t.Errorf("a redelivery over the quota: %v, want duplicate", d.Outcome)
	}
	q.now.Add(monthEnds * 1e6)
	a, d = q.send("evt_4")
	a.want(t, "the retry after the month's end", http.StatusAccepted)
	if d.Outcome != webhook.Stored || q.sink.events()["evt_4"] != 1 {
		t.Errorf("the retry after the month's end: %v, stored %d times; want stored once", d.Outcome,
			q.sink.events()["evt_4"])
	}

	g := newQuotaEdge(t, webhook.GitHub(), &refuse)
	g.fill(t)
	a, d = g.send("gh-4")
	a.want(t, "GitHub over the quota", http.StatusAccepted)
	if d.Outcome != webhook.Deferred || !g.sink.last().Deferred || g.sink.last().EventID != "gh-4" {
		t.Errorf("GitHub over the quota: %v, hook %+v; want deferred, stored with Deferred", d.Outcome, g.sink.last())
	}
	overQuota(t, "GitHub over the quota", d, g.sink.last())
}

// TestOverQuotaDrop: a delivery over a quota that drops is answered 202
// (the outcome dropped, OnDelivery naming the quota), stored nowhere,
// with no Retry-After, for a provider that retries or not; its claim is
// released, so a redelivery after the month's end is stored; a
// redelivery of a stored event is still 200.
func TestOverQuotaDrop(t *testing.T) {
	drop := webhook.QuotaDrop
	for _, p := range []webhook.Provider{webhook.Stripe(0), webhook.GitHub()} {
		t.Run(p.Name(), func(t *testing.T) {
			q := newQuotaEdge(t, p, &drop)
			q.fill(t)
			a, d := q.send("evt_4")
			a.want(t, "over the quota", http.StatusAccepted)
			if d.Outcome != webhook.Dropped || d.Outcome.String() != "dropped" || a.header.Get("Retry-After") != "" {
				t.Errorf("over the quota: %v, Retry-After %q; want dropped, none", d.Outcome, a.header.Get("Retry-After"))
			}
			overQuota(t, "over the quota", d, nil)
			// Its claim was released, not left pending: its redelivery
			// is dropped again, not 409.
			a, d = q.send("evt_4")
			a.want(t, "a redelivery over the quota", http.StatusAccepted)
			if d.Outcome != webhook.Dropped {
				t.Errorf("a redelivery over the quota: %v, want dropped", d.Outcome)
			}
			if n := q.sink.events()["evt_4"]; n != 0 || d.Sink != 0 {
				t.Errorf("a dropped delivery was stored %d times (Sink %v)", n, d.Sink)
			}
			if !strings.Contains(a.header.Get("RateLimit"), `"hooks_month";r=0;t=3600`) {
				t.Errorf("dropped: RateLimit %q, want the quota at r=0, t=3600", a.header.Get("RateLimit"))
			}
			a, _ = q.send("evt_1")
			a.want(t, "a redelivery of a stored event over the quota", http.StatusOK)
			q.now.Add(monthEnds * 1e6)
			a, d = q.send("evt_4")
			a.want(t, "its redelivery after the month's end", http.StatusAccepted)
			if d.Outcome != webhook.Stored || q.sink.events()["evt_4"] != 1 {
				t.Errorf("its redelivery after the month's end: %v, stored %d times; want stored once",
					d.Outcome, q.sink.events()["evt_4"])
			}
		})
	}
}

// TestOverQuotaBadPolicy: a policy that is no QuotaPolicy is the
// handler's configuration: 500, as a bad plan.
func TestOverQuotaBadPolicy(t *testing.T) {
	bad := webhook.QuotaPolicy(7)
	q := newQuotaEdge(t, webhook.Stripe(0), &bad)
	a, d := q.send("evt_1")
	a.want(t, "a bad policy", http.StatusInternalServerError)
	if d.Outcome != webhook.PlanInvalid || bad.String() != "QuotaPolicy(7)" {
		t.Errorf("a bad policy: %v (%s), want plan_invalid", d.Outcome, bad)
	}
}

func TestParseQuotaPolicy(t *testing.T) {
	for _, p := range []webhook.QuotaPolicy{webhook.QuotaDefer, webhook.QuotaRefuse, webhook.QuotaDrop} {
		if got, err := webhook.ParseQuotaPolicy(p.String()); got != p || err != nil {
			t.Errorf("ParseQuotaPolicy(%q) = %v, %v", p, got, err)
		}
	}
	if _, err := webhook.ParseQuotaPolicy("ignore"); err == nil || !strings.Contains(err.Error(), `"ignore"`) {
		t.Errorf("ParseQuotaPolicy(ignore): %v, want an error naming it", err)
	}
}

// TestOverQuotaRefuseWins: a delivery over two quotas, one that refuses
// and one that drops, is refused (429: the provider's retry after the
// window's end can store it); over only the one that drops, it is
// dropped. Each policy is asked per quota kind.
func TestOverQuotaRefuseWins(t *testing.T) {
	now := time.Date(2027, 5, 10, 12, 0, 0, 0, time.UTC)
	st, err := fleetstore.OpenDriver(memory.New(func() int64 { return now.UnixMicro() }), "memory://")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	day := fleetstore.MustLimit(fleetstore.NewQuota("hooks_day", 2, calendar.Day, nil))
	month := fleetstore.MustLimit(fleetstore.NewQuota("hooks_month", 2, calendar.Month, nil))
	bytesDay := fleetstore.MustLimit(fleetstore.NewByteQuota("bytes_day", 1000, calendar.Day, nil))
	policies := map[fleetstore.Kind]webhook.QuotaPolicy{"hooks_day": webhook.QuotaRefuse,
		"hooks_month": webhook.QuotaDrop, "bytes_day": webhook.QuotaRefuse}
	e := newEdge(t, st, webhook.GitHub(), fleetstore.Plan{day, month}, func(c *webhook.Config) {
		c.Now = func() time.Time { return now }
		c.OverQuota = func(_ string, kind fleetstore.Kind) webhook.QuotaPolicy { return policies[kind] }
	})
	e.send(e.delivery("both", "ev-1", "{}")).want(t, "the 1st", http.StatusAccepted)
	e.send(e.delivery("both", "ev-2", "{}")).want(t, "the 2nd", http.StatusAccepted)
	// GitHub does not retry: refused is deferred (202, Hook.Deferred), dropped is not stored.
	e.send(e.delivery("both", "ev-3", "{}")).want(t, "over both", http.StatusAccepted)
	if h := e.sink.last(); h.EventID != "ev-3" || !h.Deferred ||
		!slices.Equal(h.OverQuota, []fleetstore.Kind{"hooks_day", "hooks_month"}) {
		t.Errorf("over both quotas: last hook %+v, want ev-3 deferred over both", h)
	}

	// The month's quota of 2, the day's of 1000 bytes: over the month only.
	d := newEdge(t, st, webhook.GitHub(), fleetstore.Plan{bytesDay, month}, func(c *webhook.Config) {
		c.Now = func() time.Time { return now }
		c.OverQuota = func(_ string, kind fleetstore.Kind) webhook.QuotaPolicy { return policies[kind] }
	})
	d.send(d.delivery("one", "ev-1", "{}")).want(t, "the 1st", http.StatusAccepted)
	d.send(d.delivery("one", "ev-2", "{}")).want(t, "the 2nd", http.StatusAccepted)
	d.send(d.delivery("one", "ev-3", "{}")).want(t, "over the month's only", http.StatusAccepted)
	if n := d.sink.events()["ev-3"]; n != 0 {
		t.Errorf("over the month's quota only, which drops: stored %d times, want 0", n)
	}
}

// TestOverQuotaDeferLocal: while the shared store is out, a node decides
// a deferred quota at its share of what was left (CONTRACT §8.2): 2 of 8
// here, with 4 nodes and no count seen. A delivery past that share is
// stored, as every deferred one is, but not named over the quota: the
// fleet's count may be far from n, and the units a node admits locally
// are not counted in it (Hook.OverQuota is what to bill). A refusing
// quota still refuses at the node's share, and names the quota.
func TestOverQuotaDeferLocal(t *testing.T) {
	st, err := fleetstore.Open("redis://" + nettest.RefusedAddr(t) + "?timeout=200ms&fallback_nodes=4")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	month := fleetstore.MustLimit(fleetstore.NewQuota("hooks_month", 8, calendar.Month, nil))
	plan := fleetstore.Plan{fleetstore.MustLimit(fleetstore.PerSecond(fleetstore.Hooks, 100, 200)), month}
	for _, policy := range []webhook.QuotaPolicy{webhook.QuotaDefer, webhook.QuotaRefuse} {
		var mu sync.Mutex
		var got []webhook.Delivery
		e := newEdge(t, st, webhook.GitHub(), plan, func(c *webhook.Config) {
			c.OverQuota = func(string, fleetstore.Kind) webhook.QuotaPolicy { return policy }
			c.OnDelivery = func(d *webhook.Delivery) {
				mu.Lock()
				defer mu.Unlock()
				got = append(got, *d)
			}
		})
		tenant := "acme-" + policy.String()
		for i := range 4 {
			ev := tenant + "-" + string(rune('a'+i))
			e.send(e.delivery(tenant, ev, "{}")).want(t, policy.String()+" "+ev, http.StatusAccepted)
			mu.Lock()
			d := got[len(got)-1]
			mu.Unlock()
			h := e.sink.last()
			if !d.Local || h == nil || h.EventID != ev || !h.Local {
				t.Fatalf("%v %s: %+v, hook %+v; want it decided locally and stored", policy, ev, d, h)
			}
			over := policy == webhook.QuotaRefuse && i >= 2 // past this node's 2
			if (len(d.OverQuota) > 0) != over || (len(h.OverQuota) > 0) != over || h.Deferred != over {
				t.Errorf("%v %s: Delivery.OverQuota %v, Hook.OverQuota %v, Deferred %v; want over %v",
					policy, ev, d.OverQuota, h.OverQuota, h.Deferred, over)
			}
		}
	}
}
