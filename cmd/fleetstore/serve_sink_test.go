package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/internal/testing/testserver"
	"github.com/fleetstore/fleetstore/webhook"
)

func testHook(i int) *webhook.Hook {
	return &webhook.Hook{ID: fmt.Sprintf("hook-%d", i), Tenant: "acme", Source: "github",
		EventID: fmt.Sprintf("event-%d", i), Received: time.Unix(1700000000, int64(i)),
		Header: http.Header{"X-Hub-Signature-256": {"sha256=00"}, "X-Github-Delivery": {fmt.Sprintf("event-%d", i)},
			"Proxy-Authorization": {"Basic cHJveHk6cHc="}},
		Body: []byte(fmt.Sprintf(`{"n":%d}`, i))}
}

// quotaHook is testHook(i), hook 1 over two quotas and hook 0 sent with
// a Fleetstore-Over-Quota header of the sender's own.
func quotaHook(i int) *webhook.Hook {
	h := testHook(i)
	switch i {
	case 0:
		h.Header.Set("Fleetstore-Over-Quota", "spoofed")
	case 1:
		h.OverQuota = []fleetstore.Kind{"events", "bytes_month"}
	}
	return h
}

// TestFileSinkRotation: each hook one JSON line with its body exactly;
// past max_bytes the file is renamed and a new one begun, keeping the
// keep newest renamed files; a body that is not UTF-8 comes back whole.
func TestFileSinkRotation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "hooks.jsonl")
	s, err := openFileSink(&fileSinkConfig{Path: path, MaxBytes: 1000, Keep: 2})
	if err != nil {
		t.Fatal(err)
	}
	const n = 20
	for i := range n {
		h := testHook(i)
		if i == 7 {
			h.Body = []byte{0xff, 0x00, '\n', 'x'}
		}
		if err := s.Store(context.Background(), h); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	rotated, _ := filepath.Glob(path + ".*")
	if len(rotated) != 2 {
		t.Errorf("%d rotated files kept, want 2: %v", len(rotated), rotated)
	}
	files := append(rotated, path)
	var got []hookRecord
	for _, f := range files {
		st, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() > 1000 {
			t.Errorf("%s: %d bytes, over max_bytes", f, st.Size())
		}
		for _, line := range readLines(t, f) {
			var r hookRecord
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatal(err)
			}
			got = append(got, r)
		}
	}
	// The files kept hold the last hooks, in order, bodies exact.
	if len(got) == 0 || len(got) >= n {
		t.Fatalf("%d hooks in the files kept, want some but not all %d", len(got), n)
	}
	for i, r := range got {
		want := testHook(n - len(got) + i)
		if n-len(got)+i == 7 {
			want.Body = []byte{0xff, 0x00, '\n', 'x'}
		}
		if r.HookID != want.ID || string(r.body()) != string(want.Body) || r.Header.Get("X-Github-Delivery") != want.EventID {
			t.Errorf("line %d: %+v, want hook %s", i, r, want.ID)
		}
	}
}

// TestForwarder: a hook spooled is POSTed to the application with its
// body and headers (hop-by-hop ones dropped) and the event id in a header,
// retried with backoff while the application fails, in order; spooled
// hooks left at Close are forwarded by the next forwarder on the directory.
func TestForwarder(t *testing.T) {
	var (
		mu       sync.Mutex
		got      []*http.Request
		bodies   []string
		failures atomic.Int64
		down     atomic.Bool
	)
	failures.Store(3)
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() || failures.Add(-1) >= 0 {
			http.Error(w, "not now", http.StatusServiceUnavailable)
			return
		}
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got, bodies = append(got, r), append(bodies, string(b))
		mu.Unlock()
	}))
	defer app.Close()
	dir := t.TempDir()
	cfg := &httpSinkConfig{URL: app.URL + "/hooks", SpoolDir: dir, EventIDHeader: "Fleetstore-Event-Id",
		Timeout: 5 * time.Second, MaxBackoff: 200 * time.Millisecond}
	f, err := openForwarder(cfg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := f.Store(context.Background(), quotaHook(i)); err != nil {
			t.Fatal(err)
		}
	}
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(got)
	}
	waitFor := func(want int) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for count() < want {
			if time.Now().After(deadline) {
				t.Fatalf("%d hooks forwarded in 20s, want %d", count(), want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitFor(3)
	// The application down: spooled, not forwarded; Close leaves them.
	down.Store(true)
	for i := 3; i < 5; i++ {
		if err := f.Store(context.Background(), quotaHook(i)); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(100 * time.Millisecond)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if f.Depth() != 2 {
		t.Errorf("spooled at Close: %d, want 2", f.Depth())
	}
	down.Store(false)
	f, err = openForwarder(cfg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	waitFor(5)
	for i, r := range got {
		h := quotaHook(i)
		if bodies[i] != string(h.Body) || r.Header.Get("Fleetstore-Event-Id") != h.EventID ||
			r.Header.Get(hookIDHeader) != h.ID || r.Header.Get(tenantHeader) != "acme" ||
			r.Header.Get(providerHeader) != "github" || r.Header.Get("X-Hub-Signature-256") != "sha256=00" {
			t.Errorf("forward %d: body %q, header %v; want hook %s", i, bodies[i], r.Header, h.ID)
		}
		if want := map[int]string{1: "events,bytes_month"}[i]; r.Header.Get(overQuotaHeader) != want {
			t.Errorf("forward %d: %s %q, want %q (a sender's own is not forwarded)", i, overQuotaHeader,
				r.Header.Get(overQuotaHeader), want)
		}
		if r.Header.Get("Proxy-Authorization") != "" {
			t.Errorf("forward %d: a hop-by-hop header forwarded", i)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for f.Depth() != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if left, _ := spooled(dir); len(left) != 0 || f.Depth() != 0 {
		t.Errorf("spool after every hook was taken: %v, depth %d", left, f.Depth())
	}
}

// TestRedisSink: each hook one entry of the stream (XADD), its fields the
// hook's, the body exact.
func TestRedisSink(t *testing.T) {
	r := testserver.StartRedis(t)
	s, err := openRedisSink(&redisSinkConfig{Stream: "hooks", MaxLen: 1000}, r.URL()+"/0")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	h := quotaHook(1)
	h.Deferred = true
	if err := s.Store(context.Background(), h); err != nil {
		t.Fatal(err)
	}
	rdb := goredis.NewClient(&goredis.Options{Addr: r.Addr})
	defer rdb.Close()
	entries, err := rdb.XRange(context.Background(), "hooks", "-", "+").Result()
	if err != nil || len(entries) != 1 {
		t.Fatalf("XRANGE: %v, %v", entries, err)
	}
	v := entries[0].Values
	var header http.Header
	_ = json.Unmarshal([]byte(fmt.Sprint(v["header"])), &header)
	if v["hook_id"] != h.ID || v["event_id"] != h.EventID || v["tenant"] != "acme" || v["provider"] != "github" ||
		v["body"] != string(h.Body) || v["deferred"] != "1" || v["local"] != "0" || v["over_quota"] != "events,bytes_month" ||
		header.Get("X-Hub-Signature-256") != "sha256=00" || !strings.HasPrefix(fmt.Sprint(v["received"]), "2023-11-14T22:13:20") {
		t.Errorf("entry %v", v)
	}
	r.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if err := s.Store(ctx, testHook(2)); err == nil {
		t.Error("Store with the server stopped: nil, want an error (the claim is released, 503)")
	}
}

// slowSink holds each hook until release is closed, telling entered.
type slowSink struct {
	sink
	entered chan struct{}
	release chan struct{}
}

func (s *slowSink) Store(ctx context.Context, h *webhook.Hook) error {
	s.entered <- struct{}{}
	<-s.release
	return s.sink.Store(ctx, h)
}

// TestServeShutdown: a delivery in flight when serve is told to stop is
// finished (202, in the sink) before the sink and the store close; the
// listener takes no new connection meanwhile; /readyz says 503 while
// draining; serve returns 0.
func TestServeShutdown(t *testing.T) {
	t.Setenv("ACME_GH", "acme-secret")
	sinkPath := filepath.Join(t.TempDir(), "hooks.jsonl")
	p := startInProcess(t, strings.Replace(goodConfig, "store:",
		"listen: 127.0.0.1:0\nsink: {file: {path: "+sinkPath+"}}\nstore:", 1))
	s, url := p.s, p.url
	slow := &slowSink{sink: s.sink, entered: make(chan struct{}, 1), release: make(chan struct{})}
	s.sink = slow
	mux, err := s.endpoints(s.cfg.Load())
	if err != nil {
		t.Fatal(err)
	}
	s.mux.Store(mux)
	code := make(chan int, 1)
	status := make(chan int, 1)
	go func() {
		req, _ := webhooktestGitHub(url+"/hooks/github/acme", "acme-secret", "in-flight")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			status <- 0
			return
		}
		resp.Body.Close()
		status <- resp.StatusCode
	}()
	<-slow.entered
	go func() { code <- p.stop() }()
	deadline := time.Now().Add(10 * time.Second)
	for !s.draining.Load() && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	rec := httptest.NewRecorder()
	s.readyz(rec, httptest.NewRequest("GET", "/readyz", nil))
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("/readyz while draining: %d, want 503", rec.Code)
	}
	time.Sleep(50 * time.Millisecond) // the listener is closed by now
	if _, err := http.Get(url + "/healthz"); err == nil {
		t.Error("a new connection taken while draining")
	}
	close(slow.release)
	if got := <-status; got != http.StatusAccepted {
		t.Errorf("the delivery in flight at shutdown: %d, want 202", got)
	}
	if got := <-code; got != exitOK {
		t.Errorf("serve returned %d, want 0", got)
	}
	lines := readLines(t, sinkPath)
	if len(lines) != 1 || !strings.Contains(lines[0], `"event_id":"in-flight"`) {
		t.Errorf("the sink after shutdown: %q", lines)
	}
}
