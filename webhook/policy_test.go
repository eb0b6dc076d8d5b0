package webhook_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/webhook"
)

// signAs signs body for any built-in provider with key, as its sender
// does; for Standard Webhooks key is the whsec_ secret.
func signAs(t *testing.T, h http.Header, provider, event, body, key string, at time.Time) {
	t.Helper()
	mac := func(k []byte, parts ...string) []byte {
		m := hmac.New(sha256.New, k)
		for _, p := range parts {
			m.Write([]byte(p))
		}
		return m.Sum(nil)
	}
	ts := strconv.FormatInt(at.Unix(), 10)
	switch provider {
	case "github", "stripe":
		sign(h, provider, event, body, key, at)
	case "shopify":
		h.Set("X-Shopify-Webhook-Id", event)
		h.Set("X-Shopify-Hmac-Sha256", base64.StdEncoding.EncodeToString(mac([]byte(key), body)))
	case "standard-webhooks":
		k, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(key, "whsec_"))
		if err != nil {
			t.Fatal(err)
		}
		h.Set("webhook-id", event)
		h.Set("webhook-timestamp", ts)
		h.Set("webhook-signature", "v1,"+base64.StdEncoding.EncodeToString(mac(k, event, ".", ts, ".", body)))
	default:
		t.Fatalf("no signer for %s", provider)
	}
}

// TestEmptySecret: an empty secret is a valid HMAC key, so anyone could
// sign with it: for every provider (and a custom one, through the
// handler) it is ErrSecret, answered 500 and logged once, never a
// delivery that verifies.
func TestEmptySecret(t *testing.T) {
	now := time.Now()
	for _, tt := range []struct {
		p     webhook.Provider
		empty string // the empty secret as the provider reads it
		body  string
	}{
		{webhook.GitHub(), "", "{}"},
		{webhook.Stripe(0), "", stripeEvent("evt_forged")},
		{webhook.Shopify(), "", "{}"},
		{webhook.StandardWebhooks(0), "whsec_", "{}"},
	} {
		t.Run(tt.p.Name(), func(t *testing.T) {
			// The provider itself, called directly.
			h := http.Header{}
			signAs(t, h, tt.p.Name(), "ev-1", tt.body, tt.empty, now)
			if err := tt.p.Verify(h, []byte(tt.body), []string{tt.empty}, now); !errors.Is(err, webhook.ErrSecret) {
				t.Errorf("Verify with the empty secret, signed with the empty key: %v, want ErrSecret", err)
			}
			if err := tt.p.Verify(h, []byte(tt.body), []string{secret, tt.empty}, now); !errors.Is(err, webhook.ErrSecret) {
				t.Errorf("an empty secret after a good one: %v, want ErrSecret (whatever the signature)", err)
			}
			// Through the handler.
			e := newEdge(t, openMemory(t), tt.p, nil, func(c *webhook.Config) {
				c.Secrets = func(string) ([]string, error) { return []string{tt.empty}, nil }
			})
			for range 3 {
				req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/hooks/acme", strings.NewReader(tt.body))
				signAs(t, req.Header, tt.p.Name(), "ev-1", tt.body, tt.empty, now)
				e.send(req).want(t, "a delivery signed with the empty key", http.StatusInternalServerError)
			}
			if n := len(e.sink.events()); n != 0 {
				t.Errorf("%d stored", n)
			}
			if n := e.logs.FilterMessageSnippet("secrets unusable").Len(); n != 1 {
				t.Errorf("%d log lines of unusable secrets, want 1 (once per state change)", n)
			}
		})
	}
	t.Run("a custom provider", func(t *testing.T) {
		e := newEdge(t, openMemory(t), acceptAll{}, nil, func(c *webhook.Config) {
			c.Secrets = func(string) ([]string, error) { return []string{secret, ""}, nil }
		})
		req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/hooks/acme", strings.NewReader("{}"))
		e.send(req).want(t, "a custom provider given an empty secret", http.StatusInternalServerError)
	})
}

// acceptAll is a custom provider that accepts anything (or answers err).
type acceptAll struct{ err error }

func (acceptAll) Name() string  { return "custom" }
func (acceptAll) Retries() bool { return true }
func (p acceptAll) Verify(http.Header, []byte, []string, time.Time) error {
	return p.err
}
func (acceptAll) EventID(http.Header, []byte) (string, error) { return "ev-1", nil }

// TestCustomProviderError: a custom Provider's error that is not
// ErrSecret is a failed verification (401), not the handler's fault.
func TestCustomProviderError(t *testing.T) {
	e := newEdge(t, openMemory(t), acceptAll{err: errors.New("custom: bad token")}, nil)
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/hooks/acme", strings.NewReader("{}"))
	e.send(req).want(t, "a plain error of a custom provider", http.StatusUnauthorized)
	e = newEdge(t, openMemory(t), acceptAll{err: webhook.ErrSecret}, nil)
	req, _ = http.NewRequest(http.MethodPost, e.srv.URL+"/hooks/acme", strings.NewReader("{}"))
	e.send(req).want(t, "ErrSecret of a custom provider", http.StatusInternalServerError)
}

// TestDuplicateWhileLimited: a redelivery of a stored hook is 200 even
// while the tenant is rate limited (a Duplicate is always 2xx), one of a
// hook being stored is 409, and a new one 429 with its claim released
// (the provider's retry is taken once the limit allows).
func TestDuplicateWhileLimited(t *testing.T) {
	one := fleetstore.MustLimit(fleetstore.NewLimit(fleetstore.Hooks, 1, time.Hour, 1)) // one hook an hour
	e := newEdge(t, openMemory(t), webhook.Stripe(0), []fleetstore.Limit{one}, func(c *webhook.Config) { c.LegacyHeaders = true })
	tenant, event := randomEvent("t-"), randomEvent("evt_")
	e.send(e.delivery(tenant, event, stripeEvent(event))).want(t, "the first delivery", http.StatusAccepted)
	a := e.send(e.delivery(tenant, event, stripeEvent(event)))
	a.want(t, "its redelivery, the tenant limited", http.StatusOK)
	if a.header.Get("Retry-After") != "" || a.header.Get("X-RateLimit-Remaining") != "0" {
		t.Errorf("the Duplicate: Retry-After %q, X-RateLimit-Remaining %q; want none, 0", a.header.Get("Retry-After"), a.header.Get("X-RateLimit-Remaining"))
	}
	fresh := randomEvent("evt_")
	a = e.send(e.delivery(tenant, fresh, stripeEvent(fresh)))
	a.want(t, "a new event, the tenant limited", http.StatusTooManyRequests)
	if ra, _ := strconv.Atoi(a.header.Get("Retry-After")); ra < 3000 {
		t.Errorf("429: Retry-After %q, want the limit's (about an hour)", a.header.Get("Retry-After"))
	}
	// Its claim was released: another delivery of it is not Pending.
	e.send(e.delivery(tenant, fresh, stripeEvent(fresh))).want(t, "the new event again", http.StatusTooManyRequests)
	if got := e.sink.events(); len(got) != 1 || got[event] != 1 {
		t.Errorf("sink: %v", got)
	}

	// A redelivery while the first is being stored: 409, not 429.
	e = newEdge(t, openMemory(t), webhook.Stripe(0), []fleetstore.Limit{one})
	e.sink.block = make(chan struct{})
	first := make(chan answer, 1)
	go func() { first <- e.send(e.delivery(tenant, event, stripeEvent(event))) }()
	waitCalls(t, e.sink, 1)
	a = e.send(e.delivery(tenant, event, stripeEvent(event)))
	a.want(t, "a redelivery while the first is stored, the tenant limited", http.StatusConflict)
	if ra, _ := strconv.Atoi(a.header.Get("Retry-After")); ra < 1 || ra > 30 {
		t.Errorf("409: Retry-After %q, want the claim's remaining time", a.header.Get("Retry-After"))
	}
	close(e.sink.block)
	(<-first).want(t, "the first", http.StatusAccepted)
}

func waitCalls(t *testing.T, s *sink, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.mu.Lock()
		calls := s.calls
		s.mu.Unlock()
		if calls >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sink was called %d times, want %d", calls, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestOverByteBurst: a body over the tenant's byte burst (under MaxBody)
// is 413 for a provider that retries, and, for GitHub, which does not,
// accepted deferred: claimed alone, charging nothing, stored once.
func TestOverByteBurst(t *testing.T) {
	hooks := fleetstore.MustLimit(fleetstore.PerSecond(fleetstore.Hooks, 100, 200))
	bodyBytes := fleetstore.MustLimit(fleetstore.NewByteLimit(fleetstore.Bytes, 1000, 100))
	big := strings.Repeat("x", 150)
	tenant := randomEvent("t-")

	e := newEdge(t, openMemory(t), webhook.Stripe(0), []fleetstore.Limit{hooks, bodyBytes})
	ev := randomEvent("evt_")
	body := `{"id":"` + ev + `","pad":"` + big + `"}`
	e.send(e.delivery(tenant, ev, body)).want(t, "stripe, a body over the byte burst", http.StatusRequestEntityTooLarge)

	e = newEdge(t, openMemory(t), webhook.GitHub(), []fleetstore.Limit{hooks, bodyBytes})
	e.send(e.delivery(tenant, "g-big", big)).want(t, "github, a body over the byte burst", http.StatusAccepted)
	if h := e.sink.last(); h == nil || !h.Deferred || h.EventID != "g-big" {
		t.Fatalf("github over the byte burst: stored %+v, want it deferred", h)
	}
	e.send(e.delivery(tenant, "g-big", big)).want(t, "its redelivery", http.StatusOK)
	// Nothing was charged: the tenant's byte burst is whole.
	a := e.send(e.delivery(tenant, "g-full", strings.Repeat("x", 100)))
	a.want(t, "a body of the byte burst", http.StatusAccepted)
	if e.sink.last().Deferred {
		t.Error("a body of the burst was deferred: the big one was charged")
	}
	if got := e.sink.events(); len(got) != 2 || got["g-big"] != 1 {
		t.Errorf("sink: %v", got)
	}
}

// TestBadNode: a Node over 256 bytes is refused by New, naming the field;
// a NewHookID that returns a bad id is the handler's fault: 500, logged
// once, not the sender's 400.
func TestBadNode(t *testing.T) {
	st := openMemory(t)
	_, err := webhook.New(webhook.Config{
		Store: st, Provider: webhook.GitHub(), Sink: &sink{}, Node: strings.Repeat("n", 257),
		Secrets: func(string) ([]string, error) { return nil, nil },
		Tenant:  func(*http.Request, []byte) (string, error) { return "t", nil },
	})
	var inv *fleetstore.InvalidError
	if !errors.As(err, &inv) || inv.Field != "config.node" {
		t.Errorf("a node of 257 bytes: %v, want config.node", err)
	}

	e := newEdge(t, st, webhook.GitHub(), nil, func(c *webhook.Config) { c.NewHookID = func() string { return "" } })
	for i := range 3 {
		a := e.send(e.delivery("acme", "g-"+strconv.Itoa(i), "{}"))
		a.want(t, "a hook id of 0 bytes", http.StatusInternalServerError)
	}
	if n := e.logs.FilterMessageSnippet("hook id or node").Len(); n != 1 {
		t.Errorf("%d log lines of the bad hook id, want 1", n)
	}
}

// TestUnknownTenant: Secrets returning ErrUnknownTenant is 404 and logs
// nothing (any sender can name any tenant); (nil, nil) is 401.
func TestUnknownTenant(t *testing.T) {
	e := newEdge(t, openMemory(t), webhook.GitHub(), nil, func(c *webhook.Config) {
		c.Secrets = func(tenant string) ([]string, error) {
			switch tenant {
			case "acme":
				return []string{secret}, nil
			case "nosecrets":
				return nil, nil
			}
			return nil, errors.Join(webhook.ErrUnknownTenant, errors.New("vault: secret/"+tenant+": not found"))
		}
	})
	for i := range 3 {
		e.send(e.delivery("ghost"+strconv.Itoa(i), "g-"+strconv.Itoa(i), "{}")).want(t, "an unknown tenant", http.StatusNotFound)
		e.send(e.delivery("acme", "g-ok-"+strconv.Itoa(i), "{}")).want(t, "a known one", http.StatusAccepted)
	}
	e.send(e.delivery("nosecrets", "g-n", "{}")).want(t, "a tenant without secrets", http.StatusUnauthorized)
	for _, l := range e.logs.All() {
		if strings.Contains(l.Message, "secrets") {
			t.Errorf("logged %q for an unknown tenant", l.Message)
		}
	}
}

// TestCommitFails: a commit that fails after the hook was stored is still
// 202 (the hook is durable), logged once.
func TestCommitFails(t *testing.T) {
	st := openMemory(t)
	e := newEdge(t, st, webhook.GitHub(), nil)
	e.sink.fail = func(int) error { st.Close(); return nil } // stored; then the Store is gone
	e.send(e.delivery("acme", "g-1", "{}")).want(t, "stored, the commit fails", http.StatusAccepted)
	if n := e.logs.FilterMessageSnippet("a commit failed").Len(); n != 1 {
		t.Errorf("%d log lines of the failed commit, want 1", n)
	}
}

// TestSecretsStateNotToggled: a sender who names tenants whose Secrets
// fail (not with ErrUnknownTenant), between real deliveries, gets the
// "secrets unusable" state logged once, not once per real delivery; it
// ends on a delivery that verifies a minute after the last failure.
func TestSecretsStateNotToggled(t *testing.T) {
	var now atomic.Int64
	now.Store(time.Now().UnixNano())
	e := newEdge(t, openMemory(t), webhook.GitHub(), nil, func(c *webhook.Config) {
		c.Now = func() time.Time { return time.Unix(0, now.Load()) }
		c.Secrets = func(tenant string) ([]string, error) {
			if tenant == "acme" {
				return []string{secret}, nil
			}
			return nil, errors.New("vault: 403 permission denied")
		}
	})
	for i := range 5 {
		e.send(e.delivery("ghost", "g-x"+strconv.Itoa(i), "{}")).want(t, "a tenant whose Secrets fail", http.StatusInternalServerError)
		e.send(e.delivery("acme", "g-"+strconv.Itoa(i), "{}")).want(t, "a real one", http.StatusAccepted)
	}
	if n := e.logs.FilterMessageSnippet("secrets unusable").Len(); n != 1 {
		t.Errorf("%d lines of unusable secrets, want 1", n)
	}
	if n := e.logs.FilterMessageSnippet("usable again").Len(); n != 0 {
		t.Errorf("%d lines of usable again within the minute, want 0", n)
	}
	now.Add(int64(time.Minute))
	e.send(e.delivery("acme", "g-later", "{}")).want(t, "a real one, a minute on", http.StatusAccepted)
	if n := e.logs.FilterMessageSnippet("usable again").Len(); n != 1 {
		t.Errorf("%d lines of usable again, want 1", n)
	}
}
