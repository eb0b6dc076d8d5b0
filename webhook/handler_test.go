package webhook_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/webhook"
)

const secret = "s3cr3t-of-acme"

// sink records what it stored; fail, when set, decides a failure.
type sink struct {
	mu     sync.Mutex
	stored []*webhook.Hook
	calls  int
	fail   func(call int) error
	block  chan struct{} // when set, Store waits for it
}

func (s *sink) Store(ctx context.Context, h *webhook.Hook) error {
	s.mu.Lock()
	s.calls++
	call, block := s.calls, s.block
	s.mu.Unlock()
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if s.fail != nil {
		if err := s.fail(call); err != nil {
			return err
		}
	}
	s.mu.Lock()
	s.stored = append(s.stored, h)
	s.mu.Unlock()
	return nil
}

// events returns the event ids stored, each with how many times.
func (s *sink) events() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for _, h := range s.stored {
		out[h.EventID]++
	}
	return out
}

func (s *sink) last() *webhook.Hook {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.stored) == 0 {
		return nil
	}
	return s.stored[len(s.stored)-1]
}

// edge is a handler under test behind an httptest server.
type edge struct {
	t    *testing.T
	srv  *httptest.Server
	sink *sink
	p    webhook.Provider
	logs *observer.ObservedLogs
}

func newEdge(t *testing.T, store *fleetstore.Store, p webhook.Provider, limits []fleetstore.Limit, tweak ...func(*webhook.Config)) *edge {
	t.Helper()
	core, logs := observer.New(zap.InfoLevel)
	sk := &sink{}
	cfg := webhook.Config{
		Store:    store,
		Provider: p,
		Secrets:  func(tenant string) ([]string, error) { return []string{secret}, nil },
		Tenant: func(r *http.Request, _ []byte) (string, error) {
			if t := r.PathValue("tenant"); t != "" && t != "nobody" {
				return t, nil
			}
			return "", errors.New("no such tenant")
		},
		Sink:   sk,
		Limits: limits,
		Logger: zap.New(core),
		Node:   "edge-test",
	}
	for _, f := range tweak {
		f(&cfg)
	}
	h, err := webhook.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/hooks/{tenant}", h)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &edge{t: t, srv: srv, sink: sk, p: p, logs: logs}
}

// delivery is one signed request of e's provider for event, as the
// provider would send it.
func (e *edge) delivery(tenant, event, body string) *http.Request {
	req, err := http.NewRequest(http.MethodPost, e.srv.URL+"/hooks/"+tenant, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	sign(req.Header, e.p.Name(), event, body, secret, time.Now())
	return req
}

// sign signs body for provider as its sender does (crypto/hmac here; the
// providers are held to their docs' vectors in provider_test.go).
func sign(h http.Header, provider, event, body, key string, at time.Time) {
	mac := func(k []byte, parts ...string) []byte {
		m := hmac.New(sha256.New, k)
		for _, p := range parts {
			m.Write([]byte(p))
		}
		return m.Sum(nil)
	}
	switch provider {
	case "github":
		h.Set("X-GitHub-Delivery", event)
		h.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac([]byte(key), body)))
	case "stripe":
		ts := strconv.FormatInt(at.Unix(), 10)
		h.Set("Stripe-Signature", "t="+ts+",v1="+hex.EncodeToString(mac([]byte(key), ts, ".", body)))
	}
}

func stripeEvent(id string) string {
	return `{"id":"` + id + `","object":"event","type":"charge.succeeded"}`
}

type answer struct {
	status int
	header http.Header
	body   string
}

func (e *edge) send(req *http.Request) answer {
	e.t.Helper()
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, string(b)}
}

func (a answer) want(t *testing.T, what string, status int) {
	t.Helper()
	if a.status != status {
		t.Fatalf("%s: %d %q, want %d", what, a.status, a.body, status)
	}
}

// show is the response as a sender sees it: status and the fields of
// interest, for the test log.
func (a answer) show() string {
	var b strings.Builder
	fmt.Fprintf(&b, "HTTP %d\n", a.status)
	var keys []string
	for k := range a.header {
		if strings.Contains(k, "Rate") || k == "Retry-After" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "%s: %s\n", k, a.header.Get(k))
	}
	return b.String()
}

func randomEvent(prefix string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// endToEnd runs the handler's stories against store, whose URL is shared
// by every Store of the test (a tenant per story keeps them apart).
func endToEnd(t *testing.T, open func(t *testing.T) *fleetstore.Store) {
	t.Run("a delivery twice", func(t *testing.T) {
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
	})

	t.Run("a captured delivery replayed under another event id", func(t *testing.T) {
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
	})

	t.Run("plans, a plan change, near-limit, every delivery's outcome", func(t *testing.T) {
		// One hook an hour: nothing refills during the test.
		pro := fleetstore.Plan{fleetstore.MustLimit(fleetstore.NewLimit(fleetstore.Hooks, 1, time.Hour, 10))}
		free := fleetstore.Plan{fleetstore.MustLimit(fleetstore.NewLimit(fleetstore.Hooks, 1, time.Hour, 2))}
		big, small := randomEvent("t-"), randomEvent("t-")
		var mu sync.Mutex
		plans := map[string]fleetstore.Plan{big: pro, small: free}
		var got []webhook.Delivery
		st := open(t)
		e := newEdge(t, st, webhook.Stripe(0), nil, func(c *webhook.Config) {
			c.Plan = func(tenant string) fleetstore.Plan {
				mu.Lock()
				defer mu.Unlock()
				return plans[tenant]
			}
			c.NearLimit = 0.8
			c.OnDelivery = func(d *webhook.Delivery) {
				mu.Lock()
				defer mu.Unlock()
				got = append(got, *d)
			}
		})
		send := func(tenant string) answer {
			event := randomEvent("evt_")
			return e.send(e.delivery(tenant, event, stripeEvent(event)))
		}
		deliveries := func() []webhook.Delivery {
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(got)
		}
		// Each tenant gets its plan's burst; the 9th of 10 crosses 80 %.
		for i := range 11 {
			a := send(big)
			if want := http.StatusAccepted; i == 10 {
				a.want(t, "the 11th on pro", http.StatusTooManyRequests)
			} else {
				a.want(t, "on pro", want)
			}
		}
		for i := range 3 {
			a := send(small)
			if i < 2 {
				a.want(t, "on free", http.StatusAccepted)
			} else {
				a.want(t, "the 3rd on free", http.StatusTooManyRequests)
			}
		}
		var near []int
		for i, d := range deliveries() {
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

		// The big tenant moves to free: its TAT, 11 hours ahead, is over
		// free's 2-hour capacity, so it is refused until it drains; Reset
		// forgives the debt, and it has free's burst at once.
		mu.Lock()
		plans[big] = free
		mu.Unlock()
		a := send(big)
		a.want(t, "pro's debt on free", http.StatusTooManyRequests)
		if ra, _ := strconv.Atoi(a.header.Get("Retry-After")); ra < 8*3600 {
			t.Errorf("Retry-After %q, want the ~9h until the debt is within free's burst",
				a.header.Get("Retry-After"))
		}
		if err := st.Reset(context.Background(), big); err != nil {
			t.Fatal(err)
		}
		send(big).want(t, "after Reset, free's 1st", http.StatusAccepted)
		send(big).want(t, "free's 2nd", http.StatusAccepted)
		send(big).want(t, "free's 3rd", http.StatusTooManyRequests)

		// A shadow limit refuses no one, is left out of the headers, and
		// names the deliveries it would have refused.
		shadowed := randomEvent("t-")
		mu.Lock()
		plans[shadowed] = fleetstore.Plan{pro[0],
			fleetstore.MustLimit(fleetstore.NewLimit("hooks_next", 1, time.Hour, 1)).Shadow()}
		mu.Unlock()
		nearShadow := 0
		for i := range 4 {
			a := send(shadowed)
			a.want(t, "under a shadow limit", http.StatusAccepted)
			ds := deliveries()
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

		// A plan Plan.Check refuses is the handler's fault: 500, logged once.
		mu.Lock()
		plans[small] = fleetstore.Plan{free[0], free[0]}
		mu.Unlock()
		for range 2 {
			send(small).want(t, "a bad plan", http.StatusInternalServerError)
		}
		if n := e.logs.FilterMessageSnippet("Config.Plan").Len(); n != 1 {
			t.Errorf("%d log lines for a bad plan, want 1", n)
		}
		ds := deliveries()
		if d := ds[len(ds)-1]; d.Outcome != webhook.PlanInvalid || d.Status != 500 || d.HookID != "" {
			t.Errorf("a bad plan's delivery: %+v", d)
		}
		e.send(e.delivery("nobody", "g-x", "{}")).want(t, "an unknown tenant", http.StatusNotFound)
		ds = deliveries()
		if d := ds[len(ds)-1]; d.Outcome != webhook.UnknownTenant || d.Tenant != "" || d.EventID != "" {
			t.Errorf("an unknown tenant's delivery: %+v", d)
		}
	})

	t.Run("a forged signature charges nothing and claims nothing", func(t *testing.T) {
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
	})

	t.Run("a burst beyond the limit", func(t *testing.T) {
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
	})

	t.Run("a sink failure releases; the retry is stored once", func(t *testing.T) {
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
	})

	t.Run("a delivery while another of its event is stored is 409", func(t *testing.T) {
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
	})

	t.Run("bad deliveries", func(t *testing.T) {
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
	})

	t.Run("ErrClosed and a cancelled request are 503", func(t *testing.T) {
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
	})
}

// handler builds a second handler on st for direct ServeHTTP calls.
func (e *edge) handler(t *testing.T, st *fleetstore.Store) http.Handler {
	h, err := webhook.New(webhook.Config{
		Store: st, Provider: e.p, Sink: e.sink,
		Secrets: func(string) ([]string, error) { return []string{secret}, nil },
		Tenant:  func(r *http.Request, _ []byte) (string, error) { return "t", nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestEndToEndMemory(t *testing.T) {
	name := "webhook-" + randomEvent("")
	endToEnd(t, func(t *testing.T) *fleetstore.Store {
		st, err := fleetstore.Open("memory://" + name)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	})
}

// TestLogging: a condition is logged once when it starts and once when it
// ends, and no line holds the secret, a signature or a body.
func TestLogging(t *testing.T) {
	st := openMemory(t)
	var now atomic.Int64 // the handler's clock, Unix ns
	now.Store(time.Now().UnixNano())
	e := newEdge(t, st, webhook.GitHub(), nil, func(c *webhook.Config) { c.Now = func() time.Time { return time.Unix(0, now.Load()) } })
	e.sink.fail = func(call int) error {
		if call <= 3 {
			return errors.New("queue down")
		}
		return nil
	}
	tenant := randomEvent("t-")
	body := `{"secret_field":"do-not-log-me"}`
	for i := range 5 {
		e.send(e.delivery(tenant, "g-"+strconv.Itoa(i), body))
	}
	forged := e.delivery(tenant, "g-forged", body)
	forged.Header.Set("X-Hub-Signature-256", "sha256="+strings.Repeat("ab", 32))
	e.send(forged)
	e.send(e.delivery(tenant, "g-ok-soon", body)) // verifies, but within a minute of a forgery: no line
	e.send(forged)
	now.Add(int64(time.Minute))
	e.send(e.delivery(tenant, "g-ok", body))

	var msgs []string
	keys := map[string]bool{}
	for _, l := range e.logs.All() {
		line := l.Message
		for _, f := range l.Context {
			line += fmt.Sprintf(" %s=%v%s", f.Key, f.String, f.Interface)
			keys[f.Key] = true
		}
		msgs = append(msgs, l.Level.String()+" "+line)
		for _, bad := range []string{secret, "do-not-log-me", strings.Repeat("ab", 32)} {
			if strings.Contains(line, bad) {
				t.Errorf("log line %q holds %q", line, bad)
			}
		}
	}
	want := []string{"warn webhook: the sink fails", "info webhook: the sink stores again", "warn webhook: a delivery failed signature", "info webhook: deliveries verify again"}
	if len(msgs) != len(want) {
		t.Fatalf("log lines:\n%s\nwant %d, one per state change", strings.Join(msgs, "\n"), len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(msgs[i], w) {
			t.Errorf("line %d: %q, want %q…", i, msgs[i], w)
		}
	}
	// Every field the handler logs is in the package doc's "Logging", so
	// that a Logger given one of its own knows the key is taken.
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	_, logging, _ := strings.Cut(string(doc), "// # Logging\n")
	logging = strings.Join(strings.Fields(strings.ReplaceAll(logging, "//", "")), " ")
	if !keys["provider"] || !keys["error"] {
		t.Errorf("fields %v, want provider and error", keys)
	}
	for k := range keys {
		if !strings.Contains(logging, "field "+k+" ") {
			t.Errorf("the handler logs the field %s, which doc.go's \"Logging\" does not name", k)
		}
	}
}

// TestConfig: New refuses a bad configuration, naming the field.
func TestConfig(t *testing.T) {
	st := openMemory(t)
	good := func() webhook.Config {
		return webhook.Config{
			Store: st, Provider: webhook.GitHub(), Sink: &sink{},
			Secrets: func(string) ([]string, error) { return nil, nil },
			Tenant:  func(*http.Request, []byte) (string, error) { return "t", nil },
		}
	}
	hooks := fleetstore.MustLimit(fleetstore.PerSecond(fleetstore.Hooks, 1, 1))
	for _, tt := range []struct {
		field string
		f     func(*webhook.Config)
	}{
		{"config.store", func(c *webhook.Config) { c.Store = nil }},
		{"config.provider", func(c *webhook.Config) { c.Provider = nil }},
		{"config.secrets", func(c *webhook.Config) { c.Secrets = nil }},
		{"config.tenant", func(c *webhook.Config) { c.Tenant = nil }},
		{"config.sink", func(c *webhook.Config) { c.Sink = nil }},
		{"config.limits", func(c *webhook.Config) { c.Limits = make([]fleetstore.Limit, fleetstore.MaxCharges+1) }},
		{"config.limits[0]", func(c *webhook.Config) { c.Limits = []fleetstore.Limit{{}} }},
		{"config.limits[1]", func(c *webhook.Config) { c.Limits = []fleetstore.Limit{hooks, hooks} }},
		{"config.max_body", func(c *webhook.Config) { c.MaxBody = -1 }},
		{"config.ttl", func(c *webhook.Config) { c.TTL = time.Microsecond }},
		{"config.pending_ttl", func(c *webhook.Config) { c.PendingTTL = 5 * time.Second }},
		{"config.sink_timeout", func(c *webhook.Config) { c.SinkTimeout = -time.Second }},
	} {
		cfg := good()
		tt.f(&cfg)
		_, err := webhook.New(cfg)
		var inv *fleetstore.InvalidError
		if !errors.Is(err, fleetstore.ErrInvalid) || !errors.As(err, &inv) || inv.Field != tt.field {
			t.Errorf("%s: got %v", tt.field, err)
		}
	}
	if _, err := webhook.New(good()); err != nil {
		t.Errorf("good config: %v", err)
	}
}

// TestSecretsFail: Secrets failing is 500, the handler's fault, and
// nothing reaches the Store.
func TestSecretsFail(t *testing.T) {
	st := openMemory(t)
	e := newEdge(t, st, webhook.GitHub(), nil, func(c *webhook.Config) {
		c.Secrets = func(string) ([]string, error) { return nil, errors.New("vault sealed") }
	})
	a := e.send(e.delivery("acme", "g-1", "{}"))
	a.want(t, "secrets unavailable", http.StatusInternalServerError)
	if a.header.Get("RateLimit") != "" || len(e.sink.events()) != 0 {
		t.Error("reached the Store")
	}
}

// TestReadError: a body whose read fails is 400, never a truncated body
// handed on.
func TestReadError(t *testing.T) {
	st := openMemory(t)
	e := newEdge(t, st, webhook.GitHub(), nil)
	h := e.handler(t, st)
	req := e.delivery("acme", "g-1", "{}")
	req.Body = io.NopCloser(io.MultiReader(bytes.NewReader([]byte("{")), errReader{}))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusBadRequest || len(e.sink.events()) != 0 {
		t.Errorf("a failing read: %d, %d stored; want 400, none", rec.Code, len(e.sink.events()))
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("connection reset by peer") }

// TestSinkPanic: a Sink that panics is a Sink failure: 503, the claim
// released, and the panic's value is not logged.
func TestSinkPanic(t *testing.T) {
	st := openMemory(t)
	e := newEdge(t, st, webhook.GitHub(), nil)
	e.sink.fail = func(call int) error {
		if call == 1 {
			panic("the body was " + "do-not-log-me")
		}
		return nil
	}
	e.send(e.delivery("acme", "g-1", "{}")).want(t, "a panicking sink", http.StatusServiceUnavailable)
	e.send(e.delivery("acme", "g-1", "{}")).want(t, "the retry", http.StatusAccepted)
	for _, l := range e.logs.All() {
		for _, f := range l.Context {
			if strings.Contains(fmt.Sprint(f.Interface), "do-not-log-me") {
				t.Errorf("the panic's value was logged: %v", f.Interface)
			}
		}
	}
}

// openMemory opens a private memory store, closed when the test ends.
func openMemory(t *testing.T) *fleetstore.Store {
	t.Helper()
	st, err := fleetstore.Open("memory://")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}
