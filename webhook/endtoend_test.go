package webhook_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/webhook"
)

// opener opens a Store of the test's kind, closed when t ends: every
// Store of one test shares its URL (a tenant per story keeps them apart).
type opener func(t *testing.T) *fleetstore.Store

// stories are the handler's end-to-end stories, each run on every kind of
// store (TestEndToEndMemory, TestEndToEndRedis).
var stories = []struct {
	name string
	run  func(t *testing.T, open opener)
}{
	{"a delivery twice", storyTwice},
	{"a captured delivery replayed under another event id", storyReplay},
	{"plans, a plan change, near-limit, every delivery's outcome", storyPlans},
	{"a forged signature charges nothing and claims nothing", storyForged},
	{"a burst beyond the limit", storyBurst},
	{"a sink failure releases; the retry is stored once", storySinkFails},
	{"a delivery while another of its event is stored is 409", storyPending},
	{"bad deliveries", storyBadDeliveries},
	{"ErrClosed and a cancelled request are 503", storyStoreOut},
}

// endToEnd runs every story on the Stores open opens.
func endToEnd(t *testing.T, open opener) {
	for _, s := range stories {
		t.Run(s.name, func(t *testing.T) { s.run(t, open) })
	}
}

// storyTwice: a delivery twice.
func storyTwice(t *testing.T, open opener) {
	e := newEdge(t, open(t), webhook.GitHub(), nil)
	tenant, event := randomEvent("t-"), randomEvent("guid-")
	e.send(e.delivery(tenant, event, `{"zen":"Design for failure."}`)).want(t, "first delivery", http.StatusAccepted)
	a := e.send(e.delivery(tenant, event, `{"zen":"Design for failure."}`))
	a.want(t, "the same delivery again", http.StatusOK)
	if got := e.sink.events(); got[event] != 1 || len(got) != 1 || e.sink.calls != 1 {
		t.Errorf("sink: %v in %d calls, want the event once", got, e.sink.calls)
	}
	if h := e.sink.last(); h.Source != "github" || h.Tenant != tenant || h.Deferred || h.Local || h.ID == "" {
		t.Errorf("hook %+v", h)
	}
}

// storyReplay: a captured delivery replayed under another event id.
func storyReplay(t *testing.T, open opener) {
	body := `{"action":"opened","number":` + strconv.Itoa(int(time.Now().UnixNano()%1e6)) + `}`
	tenant, event, replayed := randomEvent("t-"), randomEvent("guid-"), randomEvent("guid-")
	// Without ClaimBody the replay is a new event (the package doc's
	// "Replay"); with it, a Duplicate naming the first hook, and a
	// redelivery too. Another body under the first id is another event.
	plain := newEdge(t, open(t), webhook.GitHub(), nil)
	plain.send(plain.delivery(tenant, event, body)).want(t, "first delivery", http.StatusAccepted)
	plain.send(plain.delivery(tenant, replayed, body)).want(t, "replay, no ClaimBody",
		http.StatusAccepted)
	tenant = randomEvent("t-")
	e := newEdge(t, open(t), webhook.GitHub(), nil, func(c *webhook.Config) { c.ClaimBody = true })
	e.send(e.delivery(tenant, event, body)).want(t, "first delivery", http.StatusAccepted)
	e.send(e.delivery(tenant, replayed, body)).want(t, "replay under another id", http.StatusOK)
	e.send(e.delivery(tenant, event, body)).want(t, "redelivery", http.StatusOK)
	e.send(e.delivery(tenant, event, body+" ")).want(t, "another body", http.StatusAccepted)
	if got := e.sink.events(); got[event] != 2 || len(got) != 1 || e.sink.calls != 2 {
		t.Errorf("sink: %v in %d calls, want the first id's two bodies, keyed on the event id",
			got, e.sink.calls)
	}
}

// storyPlans: plans, a plan change, near-limit, every delivery's outcome.
func storyPlans(t *testing.T, open opener) {
	// One hook an hour: nothing refills during the test.
	pro := fleetstore.Plan{fleetstore.MustLimit(fleetstore.NewLimit(fleetstore.Hooks, 1, time.Hour, 10))}
	free := fleetstore.Plan{fleetstore.MustLimit(fleetstore.NewLimit(fleetstore.Hooks, 1, time.Hour, 2))}
	f := newPlanned(t, open(t))
	big, small := randomEvent("t-"), randomEvent("t-")
	f.setPlan(big, pro)
	f.setPlan(small, free)
	planBursts(t, f, big, small)
	planChange(t, f, big, free)
	shadowLimit(t, f, pro)
	badPlan(t, f, small, free)
}

// planned is an edge of Stripe whose tenants' plans a story sets, with
// Config.NearLimit 0.8, keeping every Delivery.
type planned struct {
	*edge
	st    *fleetstore.Store
	mu    sync.Mutex
	plans map[string]fleetstore.Plan
	got   []webhook.Delivery
}

func newPlanned(t *testing.T, st *fleetstore.Store) *planned {
	f := &planned{st: st, plans: map[string]fleetstore.Plan{}}
	f.edge = newEdge(t, st, webhook.Stripe(0), nil, func(c *webhook.Config) {
		c.Plan = func(tenant string) fleetstore.Plan {
			f.mu.Lock()
			defer f.mu.Unlock()
			return f.plans[tenant]
		}
		c.NearLimit = 0.8
		c.OnDelivery = func(d *webhook.Delivery) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.got = append(f.got, *d)
		}
	})
	return f
}

func (f *planned) setPlan(tenant string, p fleetstore.Plan) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.plans[tenant] = p
}

// sendNew sends tenant a new Stripe event.
func (f *planned) sendNew(tenant string) answer {
	event := randomEvent("evt_")
	return f.send(f.delivery(tenant, event, stripeEvent(event)))
}

func (f *planned) deliveries() []webhook.Delivery {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.got)
}

// planBursts: each tenant gets its plan's burst, then 429; every Delivery
// says so; the 9th of pro's 10 and free's 2nd cross the near-limit mark,
// once each.
func planBursts(t *testing.T, f *planned, big, small string) {
	for i := range 11 {
		a := f.sendNew(big)
		if want := http.StatusAccepted; i == 10 {
			a.want(t, "the 11th on pro", http.StatusTooManyRequests)
		} else {
			a.want(t, "on pro", want)
		}
	}
	for i := range 3 {
		a := f.sendNew(small)
		if i < 2 {
			a.want(t, "on free", http.StatusAccepted)
		} else {
			a.want(t, "the 3rd on free", http.StatusTooManyRequests)
		}
	}
	var near []int
	for i, d := range f.deliveries() {
		if d.Provider != "stripe" || d.HookID == "" || d.EventID == "" || d.Hit <= 0 ||
			d.Received.IsZero() || d.Local {
			t.Errorf("delivery %d: %+v", i, d)
		}
		switch {
		case d.Status == http.StatusAccepted && (d.Outcome != webhook.Stored || d.Sink <= 0 ||
			d.Settle <= 0):
			t.Errorf("delivery %d: %+v, want stored, with the Sink's and the commit's times", i, d)
		case d.Status == http.StatusTooManyRequests && (d.Outcome != webhook.RateLimited ||
			d.Outcome.String() != "rate_limited" || d.Sink != 0 || d.Settle <= 0):
			t.Errorf("delivery %d: %+v, want rate_limited, its claim released", i, d)
		}
		if len(d.NearLimit) > 0 {
			near = append(near, i)
			if want := map[int]string{8: big, 12: small}[i]; d.NearLimit[0] != fleetstore.Hooks ||
				len(d.NearLimit) != 1 || d.Tenant != want {
				t.Errorf("delivery %d: near limit %v of %q", i, d.NearLimit, d.Tenant)
			}
		}
	}
	// pro: headroom 1 of 10 after the 9th (under 2, from 2); free
	// (burst 2): 1 of 2 after the 1st is not under 0.4, 0 after the 2nd
	// is, from 1: the 12th delivery. Once each.
	if !slices.Equal(near, []int{8, 12}) {
		t.Errorf("near limit on deliveries %v, want [8 12]", near)
	}
}

// planChange: big moves to free. Its TAT, 11 hours ahead, is over free's
// 2-hour capacity, so it is refused until it drains; Reset forgives the
// debt, and it has free's burst at once.
func planChange(t *testing.T, f *planned, big string, free fleetstore.Plan) {
	f.setPlan(big, free)
	a := f.sendNew(big)
	a.want(t, "pro's debt on free", http.StatusTooManyRequests)
	if ra, _ := strconv.Atoi(a.header.Get("Retry-After")); ra < 8*3600 {
		t.Errorf("Retry-After %q, want the ~9h until the debt is within free's burst",
			a.header.Get("Retry-After"))
	}
	if err := f.st.Reset(context.Background(), big); err != nil {
		t.Fatal(err)
	}
	f.sendNew(big).want(t, "after Reset, free's 1st", http.StatusAccepted)
	f.sendNew(big).want(t, "free's 2nd", http.StatusAccepted)
	f.sendNew(big).want(t, "free's 3rd", http.StatusTooManyRequests)
}

// shadowLimit: a shadow limit refuses no one, is left out of the headers,
// and names the deliveries it would have refused.
func shadowLimit(t *testing.T, f *planned, pro fleetstore.Plan) {
	shadowed := randomEvent("t-")
	f.setPlan(shadowed, fleetstore.Plan{pro[0],
		fleetstore.MustLimit(fleetstore.NewLimit("hooks_next", 1, time.Hour, 1)).Shadow()})
	nearShadow := 0
	for i := range 4 {
		a := f.sendNew(shadowed)
		a.want(t, "under a shadow limit", http.StatusAccepted)
		ds := f.deliveries()
		d := ds[len(ds)-1]
		if slices.Contains(d.NearLimit, "hooks_next") {
			nearShadow++ // once: the bucket never comes back under the mark
		}
		if would := i >= 1; would != (len(d.ShadowDenied) == 1 && d.ShadowDenied[0] == "hooks_next") ||
			strings.Contains(a.header.Get("RateLimit-Policy"), "hooks_next") {
			t.Errorf("delivery %d under a shadow limit: %+v, RateLimit-Policy %q", i+1, d,
				a.header.Get("RateLimit-Policy"))
		}
	}
	if nearShadow != 1 {
		t.Errorf("a shadow bucket in debt named near its limit %d times, want once", nearShadow)
	}
}

// badPlan: a plan Plan.Check refuses is the handler's fault: 500, logged
// once; an unknown tenant is 404, its Delivery naming none.
func badPlan(t *testing.T, f *planned, small string, free fleetstore.Plan) {
	f.setPlan(small, fleetstore.Plan{free[0], free[0]})
	for range 2 {
		f.sendNew(small).want(t, "a bad plan", http.StatusInternalServerError)
	}
	if n := f.logs.FilterMessageSnippet("Config.Plan").Len(); n != 1 {
		t.Errorf("%d log lines for a bad plan, want 1", n)
	}
	ds := f.deliveries()
	if d := ds[len(ds)-1]; d.Outcome != webhook.PlanInvalid || d.Status != 500 || d.HookID != "" {
		t.Errorf("a bad plan's delivery: %+v", d)
	}
	f.send(f.delivery("nobody", "g-x", "{}")).want(t, "an unknown tenant", http.StatusNotFound)
	ds = f.deliveries()
	if d := ds[len(ds)-1]; d.Outcome != webhook.UnknownTenant || d.Tenant != "" || d.EventID != "" {
		t.Errorf("an unknown tenant's delivery: %+v", d)
	}
}

// storyForged: a forged signature charges nothing and claims nothing.
func storyForged(t *testing.T, open opener) {
	one := fleetstore.MustLimit(fleetstore.NewLimit(fleetstore.Hooks, 1, time.Hour, 1)) // one hook an hour
	e := newEdge(t, open(t), webhook.Stripe(0), []fleetstore.Limit{one})
	tenant, event := randomEvent("t-"), randomEvent("evt_")
	for _, forge := range []func(*http.Request){
		func(r *http.Request) {
			sign(r.Header, "stripe", event, stripeEvent(event), "not the secret", time.Now())
		},
		func(r *http.Request) { r.Header.Del("Stripe-Signature") },
		func(r *http.Request) {
			sign(r.Header, "stripe", event, stripeEvent(event), secret, time.Now().Add(-time.Hour))
		}, // a replay
	} {
		req := e.delivery(tenant, event, stripeEvent(event))
		forge(req)
		a := e.send(req)
		a.want(t, "forged", http.StatusUnauthorized)
		if a.header.Get("RateLimit") != "" {
			t.Errorf("a forged delivery got RateLimit %q: it reached the Store", a.header.Get("RateLimit"))
		}
	}
	// The real one is neither limited (the forgeries charged nothing)
	// nor Pending (they claimed nothing).
	e.send(e.delivery(tenant, event, stripeEvent(event))).want(t, "the real delivery after three forgeries", http.StatusAccepted)
	e.send(e.delivery(tenant, randomEvent("evt_"), stripeEvent("evt_next"))).want(t, "a second real event (the limit is one)", http.StatusTooManyRequests)
	if len(e.sink.events()) != 1 {
		t.Errorf("sink: %v", e.sink.events())
	}
}

// storyBurst: a burst beyond the limit.
func storyBurst(t *testing.T, open opener) {
	hooks := fleetstore.MustLimit(fleetstore.PerSecond(fleetstore.Hooks, 1, 3))
	body := fleetstore.MustLimit(fleetstore.NewByteLimit(fleetstore.Bytes, 1<<20, 8<<20))
	limits := []fleetstore.Limit{hooks, body}
	for _, p := range []webhook.Provider{webhook.Stripe(0), webhook.GitHub()} {
		e := newEdge(t, open(t), p, limits, func(c *webhook.Config) { c.LegacyHeaders = true })
		tenant := randomEvent("t-")
		var last answer
		for i := 1; i <= 4; i++ {
			ev := randomEvent("evt_")
			last = e.send(e.delivery(tenant, ev, stripeEvent(ev)))
			t.Logf("%s, delivery %d of a burst, limit 1/s burst 3:\n%s", p.Name(), i, last.show())
			if i <= 3 {
				last.want(t, fmt.Sprintf("%s delivery %d", p.Name(), i), http.StatusAccepted)
				// One more hook fits within 1s (t); the bucket is
				// full again in i seconds (X-RateLimit-Reset).
				if want := `"hooks";r=` + strconv.Itoa(3-i) + ";t=1"; !strings.HasPrefix(last.header.Get("RateLimit"), want) || last.header.Get("X-RateLimit-Reset") != strconv.Itoa(i) {
					t.Errorf("%s delivery %d: RateLimit %q, X-RateLimit-Reset %q; want it to start %q, reset %ds", p.Name(), i,
						last.header.Get("RateLimit"), last.header.Get("X-RateLimit-Reset"), want, i)
				}
			}
		}
		if want := `"hooks";q=3;w=3, "bytes";q=8388608;qu="content-bytes";w=8`; last.header.Get("RateLimit-Policy") != want {
			t.Errorf("RateLimit-Policy %q, want %q", last.header.Get("RateLimit-Policy"), want)
		}
		if !strings.HasPrefix(last.header.Get("RateLimit"), `"hooks";r=0;t=1, "bytes";r=`) || last.header.Get("X-RateLimit-Remaining") != "0" || last.header.Get("X-RateLimit-Reset") != "3" {
			t.Errorf("%s over the burst: RateLimit %q, X-RateLimit-Remaining %q, X-RateLimit-Reset %q; want remaining 0, one more in 1s, full in 3s",
				p.Name(), last.header.Get("RateLimit"), last.header.Get("X-RateLimit-Remaining"), last.header.Get("X-RateLimit-Reset"))
		}
		switch p.Name() {
		case "stripe": // retries: refused, nothing stored
			last.want(t, "stripe over the burst", http.StatusTooManyRequests)
			if last.header.Get("Retry-After") != "1" {
				t.Errorf("stripe over the burst: Retry-After %q, want 1", last.header.Get("Retry-After"))
			}
			if n := len(e.sink.events()); n != 3 {
				t.Errorf("stripe: %d stored, want 3", n)
			}
		case "github": // does not retry: accepted, deferred
			last.want(t, "github over the burst", http.StatusAccepted)
			if last.header.Get("Retry-After") != "" {
				t.Errorf("github over the burst: Retry-After %q on a 202", last.header.Get("Retry-After"))
			}
			if h := e.sink.last(); h == nil || !h.Deferred || len(e.sink.events()) != 4 {
				t.Errorf("github over the burst: last hook %+v of %d, want the 4th, deferred", h, len(e.sink.events()))
			}
		}
	}
}

// storySinkFails: a sink failure releases; the retry is stored once.
func storySinkFails(t *testing.T, open opener) {
	e := newEdge(t, open(t), webhook.Stripe(0), nil)
	e.sink.fail = func(call int) error {
		if call == 1 {
			return errors.New("queue: disk full")
		}
		return nil
	}
	tenant, event := randomEvent("t-"), randomEvent("evt_")
	a := e.send(e.delivery(tenant, event, stripeEvent(event)))
	a.want(t, "the sink fails", http.StatusServiceUnavailable)
	if a.header.Get("Retry-After") != "5" {
		t.Errorf("Retry-After %q, want 5 (DefaultRetryAfter)", a.header.Get("Retry-After"))
	}
	e.send(e.delivery(tenant, event, stripeEvent(event))).want(t, "Stripe's retry", http.StatusAccepted)
	e.send(e.delivery(tenant, event, stripeEvent(event))).want(t, "a retry after it was stored", http.StatusOK)
	if got := e.sink.events(); got[event] != 1 || e.sink.calls != 2 {
		t.Errorf("sink: %v in %d calls, want the event stored once in 2 calls", got, e.sink.calls)
	}
}

// storyPending: a delivery while another of its event is stored is 409.
func storyPending(t *testing.T, open opener) {
	hooks := fleetstore.MustLimit(fleetstore.NewLimit(fleetstore.Hooks, 1, time.Hour, 200))
	e := newEdge(t, open(t), webhook.GitHub(), []fleetstore.Limit{hooks})
	e.sink.block = make(chan struct{})
	tenant, event := randomEvent("t-"), randomEvent("guid-")
	first := make(chan answer, 1)
	go func() { first <- e.send(e.delivery(tenant, event, "{}")) }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		e.sink.mu.Lock()
		calls := e.sink.calls
		e.sink.mu.Unlock()
		if calls == 1 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	a := e.send(e.delivery(tenant, event, "{}"))
	a.want(t, "the second delivery while the first is stored", http.StatusConflict)
	if ra, _ := strconv.Atoi(a.header.Get("Retry-After")); ra < 1 || ra > 30 {
		t.Errorf("Retry-After %q, want the claim's remaining time, 1–30s", a.header.Get("Retry-After"))
	}
	// Pending charges nothing: the RateLimit fields are the bucket as
	// the first delivery left it (one of 200 taken, the next in 1h).
	if got, want := a.header.Get("RateLimit"), `"hooks";r=199;t=3600`; got != want {
		t.Errorf("RateLimit %q, want %q", got, want)
	}
	if got, want := a.header.Get("RateLimit-Policy"), `"hooks";q=200;w=720000`; got != want {
		t.Errorf("RateLimit-Policy %q, want %q", got, want)
	}
	close(e.sink.block)
	(<-first).want(t, "the first delivery", http.StatusAccepted)
}

// storyBadDeliveries: bad deliveries.
func storyBadDeliveries(t *testing.T, open opener) {
	bytesLimit := fleetstore.MustLimit(fleetstore.NewByteLimit(fleetstore.Bytes, 1000, 100))
	e := newEdge(t, open(t), webhook.GitHub(), []fleetstore.Limit{bytesLimit}, func(c *webhook.Config) { c.MaxBody = 200 })
	tenant := randomEvent("t-")
	get, _ := http.NewRequest(http.MethodGet, e.srv.URL+"/hooks/"+tenant, nil)
	e.send(get).want(t, "GET", http.StatusMethodNotAllowed)
	e.send(e.delivery(tenant, "g-1", strings.Repeat("x", 201))).want(t, "a body over MaxBody", http.StatusRequestEntityTooLarge)
	chunked := e.delivery(tenant, "g-1", "")
	chunked.Body = io.NopCloser(strings.NewReader(strings.Repeat("x", 201)))
	chunked.ContentLength = -1 // no Content-Length: the limit is found reading
	sign(chunked.Header, "github", "g-1", strings.Repeat("x", 201), secret, time.Now())
	e.send(chunked).want(t, "a chunked body over MaxBody", http.StatusRequestEntityTooLarge)
	// A body over the byte burst: TestOverByteBurst (GitHub defers it).
	e.send(e.delivery("nobody", "g-3", "{}")).want(t, "an unknown tenant", http.StatusNotFound)
	noID := e.delivery(tenant, "g-4", "{}")
	noID.Header.Del("X-GitHub-Delivery")
	e.send(noID).want(t, "no X-GitHub-Delivery", http.StatusBadRequest)
	e.send(e.delivery(tenant, strings.Repeat("g", 1025), "{}")).want(t, "an event id over 1024 bytes", http.StatusBadRequest)
	if n := len(e.sink.events()); n != 0 {
		t.Errorf("%d stored from bad deliveries", n)
	}
	e.send(e.delivery(tenant, "g-5", strings.Repeat("x", 100))).want(t, "a body of the byte burst (none was charged before)", http.StatusAccepted)
}

// storyStoreOut: ErrClosed and a cancelled request are 503.
func storyStoreOut(t *testing.T, open opener) {
	st := open(t)
	e := newEdge(t, st, webhook.GitHub(), nil)
	tenant := randomEvent("t-")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	h := e.handler(t, st)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, e.delivery(tenant, "g-c", "{}").WithContext(ctx))
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
		t.Errorf("a cancelled request: %d, Retry-After %q; want 503 with Retry-After", rec.Code, rec.Header().Get("Retry-After"))
	}
	st.Close()
	a := e.send(e.delivery(tenant, "g-closed", "{}"))
	a.want(t, "a closed Store", http.StatusServiceUnavailable)
	if a.header.Get("Retry-After") == "" {
		t.Error("a closed Store: no Retry-After")
	}
}
