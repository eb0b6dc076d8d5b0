package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/fleetstore/fleetstore/webhook/webhooktest"
)

const quotaConfig = `listen: 127.0.0.1:0
store:
  url: memory://quota
plans:
  pro:
    - {kind: hooks, n: 100, burst: 100}
    - {kind: events, n: 1, per: month, zone: Europe/Berlin}
  free:
    - {kind: hooks, n: 100, burst: 100}
    - {kind: events, n: 1, per: month, zone: Europe/Berlin, over: drop}
tenants:
  acme: {plan: pro, secrets: {github: env:ACME_GH}}
  initech: {plan: free, secrets: {github: env:INITECH_GH}}
endpoints:
  - {path: "/hooks/github/{tenant}", provider: github}
sink:
  file: {path: %s}
`

// TestServeQuota: serve applies each plan's over. acme's plan leaves it
// unset (defer): its 2nd delivery of the month is stored with over_quota
// in the sink's line; initech's drops: its 2nd is answered 202 and not
// stored.
func TestServeQuota(t *testing.T) {
	dir := t.TempDir()
	sinkPath := filepath.Join(dir, "hooks.jsonl")
	path := filepath.Join(dir, "fleetstore.yaml")
	if err := os.WriteFile(path, fmt.Appendf(nil, quotaConfig, sinkPath), 0o600); err != nil {
		t.Fatal(err)
	}
	n := startServe(t, "node", path, dir, "ACME_GH=acme-secret", "INITECH_GH=initech-secret")
	for _, d := range []struct{ tenant, secret, id string }{
		{"acme", "acme-secret", "a-1"}, {"acme", "acme-secret", "a-2"},
		{"initech", "initech-secret", "i-1"}, {"initech", "initech-secret", "i-2"},
	} {
		req, err := webhooktest.GitHub(webhooktest.Delivery{URL: n.url + "/hooks/github/" + d.tenant,
			Body: []byte(`{"zen":"quota"}`), Secret: d.secret, ID: d.id})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Errorf("%s: %d, want 202", d.id, resp.StatusCode)
		}
	}
	n.stop(t)

	f, err := os.Open(sinkPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	over := map[string][]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r hookRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		over[r.EventID] = r.OverQuota
	}
	if len(over) != 3 || over["a-1"] != nil || !slices.Equal(over["a-2"], []string{"events"}) ||
		over["i-1"] != nil {
		t.Errorf("the sink's hooks, by event id, with their over_quota: %v; want a-1, a-2 over events, i-1", over)
	}
	if _, stored := over["i-2"]; stored {
		t.Errorf("initech's delivery over its quota, which drops, was stored")
	}
}
