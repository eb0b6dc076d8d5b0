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
