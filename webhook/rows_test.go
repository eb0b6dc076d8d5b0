package webhook

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/calendar"
)

// rowProvider verifies every body but "forged", names the event by the
// body ("noevent": none; "long-event": an event id over 1024 bytes) and
// answers the body "shake" as a handshake.
type rowProvider struct{ retries bool }

func (rowProvider) Name() string    { return "rows" }
func (p rowProvider) Retries() bool { return p.retries }

func (rowProvider) Verify(_ http.Header, body []byte, _ []string, _ time.Time) error {
	if string(body) == "forged" {
		return ErrSignature
	}
	return nil
}

func (rowProvider) EventID(_ http.Header, body []byte) (string, error) {
	switch string(body) {
	case "noevent":
		return "", ErrNoEventID
	case "long-event":
		return strings.Repeat("e", 1025), nil
	}
	return "evt-" + string(body), nil
}

func (rowProvider) Handshake(_ http.Header, body []byte) ([]byte, string, bool) {
	return []byte("shaken"), "text/plain", string(body) == "shake"
}

// rowEdge is a handler whose tenant is the request's X-Tenant and whose
// plan is the tenant's: "limited" one hook an hour, "bytes" a byte burst
// of 8, "bad-plan" a plan Plan.Check refuses, any other a generous one.
// Secrets knows no tenant "unknown" and fails for "vault-down". The Sink
// fails for the body "sink-fails" and, for "slow", waits for release.
type rowEdge struct {
	h       *Handler
	hookID  string // what NewHookID returns when set
	entered chan struct{}
	release chan struct{}
	mu      sync.Mutex
	got     []*Delivery
}

func newRowEdge(t *testing.T, retries bool, store *fleetstore.Store) *rowEdge {
	t.Helper()
	e := &rowEdge{entered: make(chan struct{}, 1), release: make(chan struct{})}
	generous := fleetstore.MustLimit(fleetstore.NewLimit(fleetstore.Hooks, 1000, time.Second, 1000))
	one := fleetstore.MustLimit(fleetstore.NewLimit(fleetstore.Hooks, 1, time.Hour, 1))
	bytes := fleetstore.MustLimit(fleetstore.NewByteLimit(fleetstore.Bytes, 8, 8))
	quota := fleetstore.MustLimit(fleetstore.NewQuota("hooks_month", 1, calendar.Month, nil))
	h, err := New(Config{
		Store: store, Provider: rowProvider{retries: retries}, MaxBody: 64,
		Secrets: func(tenant string) ([]string, error) {
			switch tenant {
			case "unknown":
				return nil, ErrUnknownTenant
			case "vault-down":
				return nil, errors.New("vault: connection refused")
			}
			return []string{"s"}, nil
		},
		Tenant: func(r *http.Request, _ []byte) (string, error) { return r.Header.Get("X-Tenant"), nil },
		Plan: func(tenant string) fleetstore.Plan {
			switch tenant {
			case "limited":
				return fleetstore.Plan{one}
			case "bytes":
				return fleetstore.Plan{bytes}
			case "bad-plan":
				return fleetstore.Plan{{}}
			case "quota-defer", "quota-drop":
				return fleetstore.Plan{generous, quota}
			}
			return fleetstore.Plan{generous}
		},
		OverQuota: func(tenant string, _ fleetstore.Kind) QuotaPolicy {
			if tenant == "quota-drop" {
				return QuotaDrop
			}
			return QuotaDefer
		},
		Sink: SinkFunc(func(ctx context.Context, h *Hook) error {
			switch string(h.Body) {
			case "sink-fails":
				return errors.New("queue: disk full")
			case "slow":
				e.entered <- struct{}{}
				<-e.release
			}
			return nil
		}),
		NewHookID: func() string {
			if e.hookID != "" {
				return e.hookID
			}
			return randomID()
		},
		OnDelivery: func(d *Delivery) {
			e.mu.Lock()
			e.got = append(e.got, d)
			e.mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	e.h = h
	return e
}

// send delivers body for tenant (method POST unless given) and returns the
// answer and the Delivery OnDelivery was handed.
func (e *rowEdge) send(t *testing.T, tenant, body string, method ...string) (*httptest.ResponseRecorder, *Delivery) {
	t.Helper()
	m := http.MethodPost
	if len(method) > 0 {
		m = method[0]
	}
	r := httptest.NewRequest(m, "/", strings.NewReader(body))
	if body == "unreadable" {
		r = httptest.NewRequest(m, "/", iotest.ErrReader(errors.New("connection reset")))
	}
	r.Header.Set("X-Tenant", tenant)
	w := httptest.NewRecorder()
	e.h.ServeHTTP(w, r)
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.got) == 0 {
		t.Fatalf("%s %q: OnDelivery not called", tenant, body)
	}
	d := e.got[len(e.got)-1]
	return w, d
}

// TestEveryStatusRow drives the handler into every row of the package
// doc's status table, one delivery each, and checks what it answered
// against the row: the outcome OnDelivery is told, the status, and
// whether Retry-After is set. A row no case reaches fails the test, so a
// row added to the table needs a case here.
func TestEveryStatusRow(t *testing.T) {
	t.Parallel()
	store, err := fleetstore.Open("memory://")
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	e := newRowEdge(t, true, store)
	deferring := newRowEdge(t, false, store)
	closed, err := fleetstore.Open("memory://")
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()
	out := newRowEdge(t, true, closed)

	reached := map[Outcome]bool{}
	check := func(what string, o Outcome, w *httptest.ResponseRecorder, d *Delivery) {
		t.Helper()
		reached[o] = true
		a := replies[o]
		if d.Outcome != o || w.Code != a.status || d.Status != w.Code {
			t.Errorf("%s: answered %d, OnDelivery told %v %d; want %v %d", what, w.Code, d.Outcome,
				d.Status, o, a.status)
		}
		if o != Handshake && !strings.HasPrefix(w.Body.String(), a.body) {
			t.Errorf("%s: body %q, the table's %q", what, w.Body.String(), a.body)
		}
		if got := w.Header().Get("Retry-After") != ""; got != (a.retry != retryNone) {
			t.Errorf("%s: Retry-After %q, the table says %q", what, w.Header().Get("Retry-After"), a.retry)
		}
	}

	w, d := e.send(t, "acme", "x", http.MethodGet)
	check("a GET", NotPost, w, d)
	w, d = e.send(t, "acme", strings.Repeat("b", 65))
	check("a body over MaxBody", TooLarge, w, d)
	w, d = e.send(t, "acme", "unreadable")
	check("a body that cannot be read", Unreadable, w, d)
	w, d = e.send(t, "unknown", "x")
	check("a tenant Secrets does not know", UnknownTenant, w, d)
	w, d = e.send(t, "acme", "forged")
	check("a forged delivery", Forged, w, d)
	w, d = e.send(t, "vault-down", "x")
	check("Secrets failing", SecretsUnusable, w, d)
	w, d = e.send(t, "acme", "shake")
	check("a handshake", Handshake, w, d)
	w, d = e.send(t, "acme", "noevent")
	check("no event id", NoEvent, w, d)
	w, d = e.send(t, "bad-plan", "x")
	check("a plan Plan.Check refuses", PlanInvalid, w, d)
	w, d = e.send(t, "acme", "x")
	check("a fresh delivery", Stored, w, d)
	w, d = e.send(t, "acme", "x")
	check("its redelivery", Duplicate, w, d)
	w, d = e.send(t, "acme", "sink-fails")
	check("a delivery the Sink fails", SinkFailed, w, d)
	w, d = e.send(t, "limited", "first")
	check("the first delivery of a limit of one", Stored, w, d)
	w, d = e.send(t, "limited", "second")
	check("a second delivery over the limit, a provider that retries", RateLimited, w, d)
	w, d = deferring.send(t, "limited", "first")
	check("the first delivery of a limit of one (no retries)", Duplicate, w, d) // claimed above
	w, d = deferring.send(t, "limited", "third")
	check("a delivery over the limit, a provider that does not retry", Deferred, w, d)
	w, d = e.send(t, "quota-defer", "first")
	check("the first delivery of a quota of one", Stored, w, d)
	w, d = e.send(t, "quota-defer", "second")
	check("a delivery over a quota, defer", OverQuota, w, d)
	w, d = e.send(t, "quota-drop", "first")
	check("the first delivery of a quota of one (drop)", Stored, w, d)
	w, d = e.send(t, "quota-drop", "second")
	check("a delivery over a quota, drop", Dropped, w, d)
	w, d = e.send(t, "bytes", "a body over the byte burst")
	check("a body over the tenant's byte burst", OverBurst, w, d)
	w, d = e.send(t, "acme", "long-event")
	check("an event id over 1024 bytes", Invalid, w, d)
	w, d = e.send(t, strings.Repeat("t", 1025), "x")
	check("a tenant over 1024 bytes", Invalid, w, d)
	e.hookID = strings.Repeat("h", 257)
	w, d = e.send(t, "acme", "y")
	check("a hook id over 256 bytes", Unclaimable, w, d)
	e.hookID = ""
	w, d = out.send(t, "acme", "x")
	check("a closed Store", StoreOut, w, d)

	// Pending: a delivery of an event another delivery is storing.
	first := httptest.NewRecorder()
	done := make(chan struct{})
	go func() {
		defer close(done)
		r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader("slow"))
		r.Header.Set("X-Tenant", "acme")
		e.h.ServeHTTP(first, r)
	}()
	select {
	case <-e.entered:
	case <-done:
		t.Fatalf("the first slow delivery never reached the Sink: %d %q", first.Code, first.Body)
	}
	w, d = e.send(t, "acme", "slow")
	check("a delivery of an event being stored", Pending, w, d)
	close(e.release)
	<-done
	if first.Code != replies[Stored].status {
		t.Errorf("the first slow delivery: %d %q, want stored", first.Code, first.Body)
	}

	for o := range replies {
		if Outcome(o) != noOutcome && !reached[Outcome(o)] {
			t.Errorf("row %q (%v) is reached by no case", replies[o].outcome, Outcome(o))
		}
	}
}
