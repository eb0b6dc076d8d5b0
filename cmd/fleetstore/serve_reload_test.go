package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore/webhook/webhooktest"
)

const reloadConfig = `listen: 127.0.0.1:0
store:
  url: memory://reload
plans:
  pro:
    - {kind: hooks, n: 100000, burst: 100000}
tenants:
  acme:
    plan: pro
    secrets: {github: env:ACME_GH}
%s
endpoints:
  - {path: "/hooks/github/{tenant}", provider: github}
sink:
  file: {path: %s}
`

// TestServeReload: SIGHUP, sent again and again while deliveries keep
// arriving, swaps in the file's tenants without dropping one (every
// delivery answered 202); a tenant added is taken after the reload and
// 404 before; a file refused, or one changing a field that needs a
// restart, keeps the running config, logged and counted.
func TestServeReload(t *testing.T) {
	dir := t.TempDir()
	sinkPath := filepath.Join(dir, "hooks.jsonl")
	path := filepath.Join(dir, "fleetstore.yaml")
	write := func(text string) {
		t.Helper()
		// Written whole and renamed, as an editor or a config manager does.
		if err := os.WriteFile(path+".tmp", []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			t.Fatal(err)
		}
	}
	globex := "  globex:\n    plan: pro\n    secrets: {github: env:GLOBEX_GH}"
	write(fmt.Sprintf(reloadConfig, "", sinkPath))
	n := startServe(t, "node", path, dir, "ACME_GH=acme-secret", "GLOBEX_GH=globex-secret")

	deliver := func(tenant, secret, id string) (int, error) {
		req, err := webhooktest.GitHub(webhooktest.Delivery{URL: n.url + "/hooks/github/" + tenant,
			Body: []byte(`{"zen":"reload"}`), Secret: secret, ID: id})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	if code, err := deliver("globex", "globex-secret", "g-before"); code != http.StatusNotFound {
		t.Fatalf("globex before the reload: %d, %v; want 404", code, err)
	}

	// Deliveries from 4 senders all through the reloads.
	var (
		stop          atomic.Bool
		wg            sync.WaitGroup
		sentN, failed atomic.Int64
		firstFailure  atomic.Value
	)
	for w := range 4 {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				code, err := deliver("acme", "acme-secret", fmt.Sprintf("w%d-%d", w, i))
				sentN.Add(1)
				if err != nil || code != http.StatusAccepted {
					failed.Add(1)
					firstFailure.CompareAndSwap(nil, fmt.Sprintf("%d %v", code, err))
				}
			}
		})
	}
	hup := func() {
		t.Helper()
		if err := n.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	waitLog := func(msg string, count int) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for strings.Count(n.stderr.String(), msg) < count {
			if time.Now().After(deadline) {
				t.Fatalf("no %d× %q in the log in 20s", count, msg)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	write(fmt.Sprintf(reloadConfig, globex, sinkPath))
	for i := range 5 {
		hup()
		waitLog(`"msg":"config reloaded"`, i+1)
	}
	if code, err := deliver("globex", "globex-secret", "g-after"); code != http.StatusAccepted {
		t.Errorf("globex after the reload: %d, %v; want 202", code, err)
	}
	// Refused: a bad file, then a field that needs a restart.
	write(fmt.Sprintf(reloadConfig, globex+"\n    oops: 1", sinkPath))
	hup()
	waitLog(`"msg":"config reload refused; the running config is kept"`, 1)
	write(strings.Replace(fmt.Sprintf(reloadConfig, "", sinkPath), "memory://reload", "memory://other", 1))
	hup()
	waitLog(`"msg":"config reload refused; the running config is kept"`, 2)
	if !strings.Contains(n.stderr.String(), `store: changed: it needs a restart`) {
		t.Errorf("the store's change is not named in the log")
	}
	if code, err := deliver("globex", "globex-secret", "g-kept"); code != http.StatusAccepted {
		t.Errorf("globex after the refused reloads: %d, %v; want 202 (the running config kept)", code, err)
	}
	stop.Store(true)
	wg.Wait()
	if ok, refused := n.metric(t, `fleetstore_serve_reloads_total\{result="ok"\}`),
		n.metric(t, `fleetstore_serve_reloads_total\{result="refused"\}`); ok != 5 || refused != 2 {
		t.Errorf("reloads counted: %v ok, %v refused; want 5 and 2", ok, refused)
	}
	n.stop(t)
	if f := failed.Load(); f > 0 || sentN.Load() < 20 {
		t.Errorf("%d of %d deliveries during the reloads not answered 202 (first: %v)", f, sentN.Load(), firstFailure.Load())
	}
	lines := readLines(t, sinkPath)
	if int64(len(lines)) != sentN.Load()+2 {
		t.Errorf("%d hooks in the sink, want %d", len(lines), sentN.Load()+2)
	}
	t.Logf("%d deliveries through 7 SIGHUPs", sentN.Load())
}
