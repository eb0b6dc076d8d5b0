package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
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
