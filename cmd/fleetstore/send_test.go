package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/fleetstore/fleetstore/webhook/webhooktest"
	"time"
)

// inProcess is serve started in this process by startInProcess.
type inProcess struct {
	s          *server
	url, admin string     // the base URLs of listen and admin_listen
	stop       func() int // shuts it down and returns serve's exit status
}

// startInProcess starts serve on the config text, listening on free
// loopback ports, in this process.
func startInProcess(t *testing.T, text string) inProcess {
	t.Helper()
	path := writeConfig(t, text)
	cfg, err := loadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	s, err := startServer(cfg, path, io.Discard, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	p := inProcess{s: s}
	for _, line := range strings.Split(stderr.String(), "\n") {
		var l struct{ Msg, Field, Addr string }
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "listening" {
			if l.Field == "listen" {
				p.url = "http://" + l.Addr
			} else {
				p.admin = "http://" + l.Addr
			}
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	code := make(chan int, 1)
	go func() { code <- s.run(ctx) }()
	stopped := false
	p.stop = func() int {
		if stopped {
			return exitOK
		}
		stopped = true
		cancel()
		return <-code
	}
	t.Cleanup(func() { p.stop() })
	return p
}

// TestSend: fleetstore send signs a delivery the receiver takes (202, the
// RateLimit fields printed, exit 0), the same event again is 200; with
// the wrong secret 401 and exit 1; the secret is never printed.
func TestSend(t *testing.T) {
	t.Setenv("ACME_GH", "acme-secret")
	dir := t.TempDir()
	url := startInProcess(t, strings.Replace(goodConfig, "store:",
		"listen: 127.0.0.1:0\nsink: {file: {path: "+filepath.Join(dir, "hooks.jsonl")+"}}\nstore:", 1)).url
	send := func(env string, wantCode int, want ...string) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		code := run(t.Context(), []string{"send", "-provider", "github", "-secret-env", env, "-id", "e1",
			"-url", url + "/hooks/github/acme", `{"zen":"send"}`}, &stdout, &stderr)
		out := stdout.String() + stderr.String()
		if code != wantCode {
			t.Errorf("send with %s: exit %d, want %d: %s", env, code, wantCode, out)
		}
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("send with %s: no %q in %q", env, w, out)
			}
		}
		if strings.Contains(out, "acme-secret") {
			t.Errorf("send printed the secret: %q", out)
		}
	}
	send("ACME_GH", exitOK, "HTTP/1.1 202 Accepted", `RateLimit: "hooks";r=2;t=`)
	send("ACME_GH", exitOK, "HTTP/1.1 200 OK")
	t.Setenv("WRONG", "not-acme-secret")
	send("WRONG", exitFail, "HTTP/1.1 401 Unauthorized")
	send("UNSET_ANYWHERE", exitUsage, `the environment variable "UNSET_ANYWHERE" is not set`)
}

// TestAdminListen: with admin_listen, /metrics, /healthz and /readyz are
// served there and not beside the endpoints, which are not served there.
func TestAdminListen(t *testing.T) {
	t.Setenv("ACME_GH", "acme-secret")
	dir := t.TempDir()
	p := startInProcess(t, strings.Replace(goodConfig, "store:", "listen: 127.0.0.1:0\n"+
		"admin_listen: 127.0.0.1:0\nsink: {file: {path: "+filepath.Join(dir, "hooks.jsonl")+"}}\nstore:", 1))
	url, admin := p.url, p.admin
	if admin == "" {
		t.Fatal("no admin_listen line")
	}
	for _, tt := range []struct {
		url  string
		want int
	}{
		{admin + "/metrics", 200}, {admin + "/healthz", 200}, {admin + "/readyz", 200},
		{url + "/metrics", 404}, {url + "/healthz", 404}, {url + "/readyz", 404},
		{admin + "/hooks/github/acme", 404}, {url + "/hooks/github/acme", 405},
	} {
		resp, err := http.Get(tt.url)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tt.want {
			t.Errorf("GET %s: %d, want %d", tt.url, resp.StatusCode, tt.want)
		}
	}
}

// TestServeHTTPSink: serve with the http sink and an endpoint of one
// tenant: a delivery reaches the application with its body, its
// provider's headers and the event id in a header; /readyz counts the
// hooks spooled while the application refuses them.
func TestServeHTTPSink(t *testing.T) {
	t.Setenv("ACME_GH", "acme-secret")
	var (
		refuse atomic.Bool
		got    = make(chan *http.Request, 10)
		bodies = make(chan string, 10)
	)
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if refuse.Load() {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		b, _ := io.ReadAll(r.Body)
		got <- r
		bodies <- string(b)
	}))
	defer app.Close()
	text := strings.Replace(goodConfig, "store:", "listen: 127.0.0.1:0\nsink: {http: {url: "+app.URL+
		", spool_dir: "+filepath.Join(t.TempDir(), "spool")+", event_id_header: X-Event, max_backoff: 50ms}}\nstore:", 1)
	text = strings.Replace(text, "path: /hooks/github/{tenant}", "path: /github\n    tenant: acme", 1)
	p := startInProcess(t, text)
	req, err := webhooktestGitHub(p.url+"/github", "acme-secret", "e-http")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("delivery: %v, %v", resp, err)
	}
	resp.Body.Close()
	select {
	case r := <-got:
		if b := <-bodies; b != `{"zen":"test"}` || r.Header.Get("X-Event") != "e-http" ||
			r.Header.Get("X-Hub-Signature-256") != req.Header.Get("X-Hub-Signature-256") ||
			r.Header.Get(tenantHeader) != "acme" {
			t.Errorf("forwarded: body %q, header %v", b, r.Header)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("nothing forwarded in 20s")
	}
	// The first hook's file is removed once the application's 2xx is read.
	for deadline := time.Now().Add(20 * time.Second); p.s.spool.Depth() != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("spool %d 20s after the application took the hook", p.s.spool.Depth())
		}
	}
	refuse.Store(true)
	for _, id := range []string{"e2", "e3"} {
		req, _ := webhooktestGitHub(p.url+"/github", "acme-secret", id)
		if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusAccepted {
			t.Fatalf("delivery %s: %v, %v", id, resp, err)
		}
	}
	rec := httptest.NewRecorder()
	p.s.readyz(rec, httptest.NewRequest("GET", "/readyz", nil))
	var r readiness
	if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil || r.Spool != 2 {
		t.Errorf("/readyz with the application refusing: %s, %v; want spool 2", rec.Body.String(), err)
	}
}

// TestEndpointOptions: an endpoint's claim_body, max_body and defer reach
// its handler: the same GitHub body under a new event id is a Duplicate,
// a body over max_body is 413, and Stripe deliveries over the plan are
// stored deferred (202) instead of refused 429.
func TestEndpointOptions(t *testing.T) {
	t.Setenv("ACME_GH", "acme-secret")
	t.Setenv("ACME_STRIPE", "whsec_acme")
	sinkPath := filepath.Join(t.TempDir(), "hooks.jsonl")
	text := strings.Replace(goodConfig, "store:", "listen: 127.0.0.1:0\nsink: {file: {path: "+sinkPath+"}}\nstore:", 1)
	text = strings.Replace(text, "memory://", "memory://endpoint-options", 1)
	text = strings.Replace(text, "n: 2, burst: 3", "n: 1, per: 1h, burst: 3", 1)
	text = strings.Replace(text, "github: env:ACME_GH", "{github: env:ACME_GH, stripe: env:ACME_STRIPE}", 1)
	text = strings.Replace(text, "    provider: github\n", "    provider: github\n    claim_body: true\n    max_body: 64\n"+
		"  - {path: \"/hooks/stripe/{tenant}\", provider: stripe, defer: true}\n", 1)
	p := startInProcess(t, text)
	deliver := func(provider, id, body string) int {
		t.Helper()
		req, err := webhooktest.Sign(provider, webhooktest.Delivery{URL: p.url + "/hooks/" + provider + "/acme",
			Body: []byte(body), Secret: map[string]string{"github": "acme-secret", "stripe": "whsec_acme"}[provider], ID: id})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tt := range []struct {
		provider, id, body string
		want               int
	}{
		{"github", "g1", `{"zen":"a"}`, 202},
		{"github", "g2", `{"zen":"a"}`, 200}, // claim_body: the same body is the same event
		{"github", "g3", `{"zen":"` + strings.Repeat("b", 64) + `"}`, 413},
		// The plan's burst of 3 an hour is spent within these: the rest
		// are deferred, not 429.
		{"stripe", "", `{"id":"evt_1"}`, 202},
		{"stripe", "", `{"id":"evt_2"}`, 202},
		{"stripe", "", `{"id":"evt_3"}`, 202},
		{"stripe", "", `{"id":"evt_4"}`, 202},
	} {
		if got := deliver(tt.provider, tt.id, tt.body); got != tt.want {
			t.Errorf("%s %s: %d, want %d", tt.provider, tt.body, got, tt.want)
		}
	}
	p.stop()
	var deferred []string
	for _, line := range readLines(t, sinkPath) {
		var r hookRecord
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		if r.Deferred {
			deferred = append(deferred, r.EventID)
		}
	}
	if len(deferred) < 2 || deferred[len(deferred)-1] != "evt_4" || deferred[len(deferred)-2] != "evt_3" {
		t.Errorf("deferred in the sink: %v, want the last ones, evt_3 and evt_4 among them", deferred)
	}
}

// TestSendBadURL: a -url that is not an http:// or https:// URL with a
// host is a bad flag, exit status 2 naming -url, before any request.
func TestSendBadURL(t *testing.T) {
	t.Setenv("ACME_GH", "acme-secret")
	for _, u := range []string{"ftp://127.0.0.1:1/h", "127.0.0.1:8080/hooks/github/acme", "http:///hooks", "http://[::1"} {
		var stdout, stderr bytes.Buffer
		code := run(t.Context(), []string{"send", "-provider", "github", "-secret-env", "ACME_GH",
			"-url", u, `{}`}, &stdout, &stderr)
		if code != exitUsage || !strings.HasPrefix(stderr.String(), "fleetstore send: -url: ") {
			t.Errorf("-url %s: exit %d, want %d naming -url; stderr %q", u, code, exitUsage, stderr.String())
		}
	}
}
