package main

import (
	"bytes"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore/calendar"
	"github.com/fleetstore/fleetstore/webhook"
	"github.com/fleetstore/fleetstore/webhook/webhooktest"
)

// goodConfig is a config file serve takes, with ACME_GH set.
const goodConfig = `store:
  url: memory://
plans:
  free:
    - {kind: hooks, n: 2, burst: 3}
tenants:
  acme:
    plan: free
    secrets:
      github: env:ACME_GH
endpoints:
  - path: /hooks/github/{tenant}
    provider: github
`

func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fleetstore.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestConfigRefused: a bad config file is refused, the error naming the
// file, the line, the field and why, and quoting no secret; the good one
// it was edited from is taken.
func TestConfigRefused(t *testing.T) {
	t.Setenv("ACME_GH", "gh-secret-value")
	t.Setenv("STORE_URL", "redis://:store-password@127.0.0.1:1/0")
	if _, err := loadConfig(writeConfig(t, goodConfig)); err != nil {
		t.Fatalf("the good config: %v", err)
	}
	for _, tt := range []struct {
		name, old, new string
		want           string // "LINE: FIELD: WHY" after the file's name
	}{
		{"unknown plan", "plan: free", "plan: gold", `:8: tenants.acme.plan: no plan "gold" (plans: free)`},
		{"a secret in a tenant's place", "  acme:\n    plan: free", "  acme: gh-literal-secret\n  other:\n    plan: free", `:7: tenants.acme: cannot unmarshal !!str a value into`},
		{"unknown field", "  url: memory://", "  url: memory://\n  urls: x", `:3: unknown field urls`},
		{"yaml syntax", "    - {kind: hooks, n: 2, burst: 3}", "    - {kind: hooks, n: 2, burst: 3", `did not find expected ',' or '}'`},
		{"a literal secret", "github: env:ACME_GH", "github: gh-literal-secret", `:10: tenants.acme.secrets.github[0]: want env:NAME or file:PATH`},
		{"env unset", "env:ACME_GH", "env:NOT_SET_ANYWHERE", `:10: tenants.acme.secrets.github[0]: the environment variable "NOT_SET_ANYWHERE" is not set`},
		{"secret file missing", "env:ACME_GH", "file:/nonexistent/gh", `:10: tenants.acme.secrets.github[0]: cannot read /nonexistent/gh: no such file or directory`},
		{"a password in the URL", "url: memory://", "url: redis://:hunter2@h:6379/0", `:2: store.url: a password in the file`},
		{"no store", "  url: memory://\n", "  url: \"\"\n", `:2: store.url: required`},
		{"bad limit", "n: 2, burst: 3", "n: 2, burst: 0", `:5: plans.free[0].burst: must be at least 1`},
		{"bytes and n", "n: 2, burst: 3", "n: 2, burst: 3, burst_bytes: 1MiB", `:5: plans.free[0]: either n, per and burst, or bytes_per_second and burst_bytes`},
		{"bad size", "n: 2, burst: 3", "bytes_per_second: 1MB, burst_bytes: 1MiB", `:5: plans.free[0].bytes_per_second: want a count of bytes such as 1048576 or 64MiB`},
		{"bad size, second", "n: 2, burst: 3", "bytes_per_second: 1MiB, burst_bytes: 1MB", `:5: plans.free[0].burst_bytes: want a count of bytes such as 1048576 or 64MiB`},
		{"empty file", goodConfig, "", `: store.url: required`},
		{"bad duration", "store:", "shutdown_timeout: soon\nstore:", `:1: shutdown_timeout: cannot unmarshal !!str a value into a duration such as 30s or 1m30s`},
		{"kind twice", "    - {kind: hooks, n: 2, burst: 3}", "    - {kind: hooks, n: 2, burst: 3}\n    - {kind: hooks, n: 5, burst: 3}", `:6: plans.free[1]: kind "hooks" charged twice`},
		{"unknown provider", "provider: github", "provider: gitlab", `:13: endpoints[0].provider: want one of discord, github, linear, paddle, shopify, slack, standard-webhooks, stripe, svix, twilio, got "gitlab"`},
		{"no tenant in path", "/hooks/github/{tenant}", "/hooks/github", `:12: endpoints[0].path: must name the tenant`},
		{"secrets of no endpoint", "github: env:ACME_GH", "github: env:ACME_GH\n      stripe: env:ACME_GH", `:11: tenants.acme.secrets.stripe: no endpoint of provider "stripe"`},
		{"degraded nodes", "store:", "degraded: {nodes: 0}\nstore:", `:1: degraded.nodes: must be the fleet's size`},
		{"two sinks", "store:", "sink: {file: {path: a}, redis: {url: redis://h, stream: s}}\nstore:", `:1: sink: one of file, redis, http, postgres, got 2`},
		{"http sink spool", "store:", "sink: {http: {url: http://app/hooks}}\nstore:", `:1: sink.http.spool_dir: required`},
		{"postgres sink, store elsewhere", "store:", "sink: {postgres: {url: postgres://h/db}}\nstore:", `:1: sink.postgres: needs store.url on postgres://`},
		{"postgres sink url", "  url: memory://", "  url: postgres://h/db\nsink: {postgres: {table: hooks}}", `:3: sink.postgres.url: required`},
		{"postgres sink password", "  url: memory://", "  url: postgres://h/db\nsink: {postgres: {url: \"postgres://u:hunter2@h/db\"}}", `:3: sink.postgres.url: a password in the file`},
		{"postgres sink scheme", "  url: memory://", "  url: postgres://h/db\nsink: {postgres: {url: redis://h/0}}", `:3: sink.postgres.url: want a postgres:// or postgresql:// URL`},
		{"postgres sink table", "  url: memory://", "  url: postgres://h/db\nsink: {postgres: {url: postgres://h/db, table: \"hooks; drop\"}}", `:3: sink.postgres.table: want NAME or SCHEMA.NAME`},
		{"a quota's zone", "    - {kind: hooks, n: 2, burst: 3}", "    - {kind: hooks, n: 2, burst: 3}\n    - {kind: bytes, bytes_per_second: 1MiB, burst_bytes: 8MiB}\n    - {kind: events, n: 10000, per: month, zone: Europe/Berlyn, over: defer}", `:7: plans.free[2].zone: want an IANA time zone such as Europe/Berlin or UTC, got "Europe/Berlyn"`},
		{"a quota in the node's Local zone", "n: 2, burst: 3", "n: 2, per: day, zone: Local", `:5: plans.free[0].zone: want an IANA time zone`},
		{"a quota's over", "n: 2, burst: 3", "n: 2, per: month, over: ignore", `:5: plans.free[0].over: want defer, refuse or drop, got "ignore"`},
		{"a quota's burst", "n: 2, burst: 3", "n: 2, burst: 3, per: month", `:5: plans.free[0].burst: a quota (per: month) has none`},
		{"a quota's n", "n: 2, burst: 3", "n: -1, per: week", `:5: plans.free[0].n: must be 1 to`},
		{"a quota's n of 0", "n: 2, burst: 3", "n: 0, per: week", `:5: plans.free[0]: a quota needs n or bytes, at least 1`},
		{"a quota's bytes of 0", "n: 2, burst: 3", "bytes: 0, per: week", `:5: plans.free[0]: a quota needs n or bytes, at least 1`},
		{"a quota without n or bytes", "n: 2, burst: 3", "per: week", `:5: plans.free[0]: a quota needs n or bytes, at least 1`},
		{"a quota's n and bytes", "n: 2, burst: 3", "n: 2, bytes: 1GiB, per: week", `:5: plans.free[0]: a quota is either n or bytes`},
		{"a shadow quota's over", "n: 2, burst: 3", "n: 2, per: day, shadow: true, over: drop", `:5: plans.free[0].over: a shadow quota denies nothing`},
		{"a zone without a quota", "n: 2, burst: 3", "n: 2, burst: 3, zone: UTC", `:5: plans.free[0].zone: only a quota (per: day, week or month) has a zone`},
		{"over without a quota", "n: 2, burst: 3", "n: 2, burst: 3, over: drop", `:5: plans.free[0].over: only a quota`},
		{"bytes without a quota", "n: 2, burst: 3", "bytes: 1MiB", `:5: plans.free[0].bytes: only a quota`},
		{"a period", "n: 2, burst: 3", "n: 2, burst: 3, per: fortnight", `:5: plans.free[0].per: want a duration such as 1s or 1h, or day, week or month`},
		{"a pattern the mux refuses", "/hooks/github/{tenant}", "/hooks/{tenant}/{tenant}", `:12: endpoints[0].path: `},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if !strings.Contains(goodConfig, tt.old) {
				t.Fatalf("the good config has no %q", tt.old)
			}
			path := writeConfig(t, strings.Replace(goodConfig, tt.old, tt.new, 1))
			err := checkConfigCommand(t, path)
			// The parser's own line (yaml.v3 counts a flow mapping's
			// error from its context) and the mux's message are theirs.
			loose := !strings.HasPrefix(tt.want, ":") && strings.HasPrefix(err, "fleetstore serve: "+path+":") &&
				strings.Contains(err, tt.want)
			if !strings.HasPrefix(err, "fleetstore serve: "+path+tt.want) && !loose {
				t.Errorf("got  %q\nwant %q", err, "fleetstore serve: "+path+tt.want+"…")
			}
			for _, secret := range []string{"gh-secret-value", "gh-literal-secret", "hunter2", "store-password"} {
				if strings.Contains(err, secret) {
					t.Errorf("the error quotes a secret: %q", err)
				}
			}
		})
	}
}

// checkConfigCommand runs "serve -check -config path", which must refuse
// the file with exit status 2, and returns its stderr.
func checkConfigCommand(t *testing.T, path string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), []string{"serve", "-check", "-config", path}, &stdout, &stderr)
	if code != exitUsage {
		t.Fatalf("exit status %d, want %d; stdout %q, stderr %q", code, exitUsage, stdout.String(), stderr.String())
	}
	return strings.TrimSpace(stderr.String())
}

// TestConfigExamples: the example config files load (their secrets and
// paths supplied), and serve -check says ok.
func TestConfigExamples(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"ACME_GITHUB_SECRET", "ACME_STRIPE_SECRET", "INITECH_GITHUB_SECRET",
		"GLOBEX_STRIPE_SECRET", "GLOBEX_STRIPE_SECRET_OLD"} {
		t.Setenv(name, "secret-of-"+name)
	}
	t.Setenv("FLEETSTORE_URL", "redis://:pw@127.0.0.1:6379/0")
	for _, f := range []string{"initech-github", "initech-stripe"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("secret\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"fleetstore.yaml", "fleet.yaml"} {
		raw, err := os.ReadFile(filepath.Join("..", "..", "examples", name))
		if err != nil {
			t.Fatal(err)
		}
		text := strings.ReplaceAll(string(raw), "/run/secrets", dir)
		path := writeConfig(t, text)
		var stdout, stderr bytes.Buffer
		if code := run(t.Context(), []string{"serve", "-check", "-config", path}, &stdout, &stderr); code != exitOK {
			t.Errorf("%s: exit status %d: %s", name, code, stderr.String())
		}
		c, err := loadConfig(path)
		if err != nil {
			t.Fatal(err)
		}
		if len(c.tenants) < 2 || len(c.endpoints) != 2 || c.tenants["acme"].secrets["github"][0] != "secret-of-ACME_GITHUB_SECRET" {
			t.Errorf("%s: tenants %d, endpoints %d", name, len(c.tenants), len(c.endpoints))
		}
	}
}

func webhooktestGitHub(url, secret, id string) (*http.Request, error) {
	return webhooktest.GitHub(webhooktest.Delivery{URL: url, Body: []byte(`{"zen":"test"}`), Secret: secret, ID: id})
}

// TestLibraryDependencies: the library's module (the root's packages and
// its drivers, as a user imports them) builds no YAML, OpenTelemetry or
// Prometheus package: serve's dependencies stay in this module.
func TestLibraryDependencies(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	cmd := exec.Command(gobin, "list", "-deps", "./...")
	cmd.Dir = filepath.Join("..", "..")
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps in the root: %v", err)
	}
	pkgs := strings.Fields(string(out))
	if !slices.Contains(pkgs, "github.com/fleetstore/fleetstore/drivers/redis") {
		t.Fatalf("go list -deps in the root lists no driver: %d packages", len(pkgs))
	}
	for _, p := range pkgs {
		if strings.Contains(p, "yaml") || strings.HasPrefix(p, "go.opentelemetry.io/") ||
			strings.HasPrefix(p, "github.com/prometheus/") || strings.HasPrefix(p, "github.com/fleetstore/fleetstore/cmd/") {
			t.Errorf("the library's module builds %s", p)
		}
	}
}

// TestServeStoreURLRefused: a store URL that Open refuses (a bad
// parameter, an unknown scheme) is a config file refused, exit status 2,
// naming the file and store.url; not a store that could not be reached.
// serve -check refuses it too.
func TestServeStoreURLRefused(t *testing.T) {
	t.Setenv("ACME_GH", "gh-secret-value")
	for _, url := range []string{"memory://?timeout=soon", "memory://?bogus=1", "mongo://h:1",
		"memory://?key_prefix=%zz&fallback_nodes=2&fallback_outbox_dir=" + t.TempDir()} {
		path := writeConfig(t, strings.Replace(goodConfig, "url: memory://", "url: "+url, 1))
		for _, args := range [][]string{{"serve", "-config", path}, {"serve", "-check", "-config", path}} {
			var stdout, stderr bytes.Buffer
			code := run(t.Context(), args, &stdout, &stderr)
			if code != exitUsage || !strings.HasPrefix(stderr.String(), "fleetstore serve: "+path+": store.url: ") {
				t.Errorf("%s %s: exit status %d, want %d; stderr %q", args[1], url, code, exitUsage, stderr.String())
			}
		}
	}
}

// TestConfigQuota: a plan's limit may be a calendar quota, n units or
// bytes per day, week or month in a zone (UTC when unset), with what
// happens over it; the tenant on that plan gets its policies, a quota
// without over none (webhook.QuotaDefer).
func TestConfigQuota(t *testing.T) {
	t.Setenv("ACME_GH", "gh-secret-value")
	text := strings.Replace(goodConfig, "    - {kind: hooks, n: 2, burst: 3}\n", `    - {kind: hooks, n: 2, burst: 3}
    - {kind: events, n: 10000, per: month, zone: Europe/Berlin, over: refuse}
    - {kind: bytes_day, bytes: 1GiB, per: day}
`, 1)
	c, err := loadConfig(writeConfig(t, text))
	if err != nil {
		t.Fatal(err)
	}
	acme := c.tenants["acme"]
	if len(acme.plan) != 3 {
		t.Fatalf("plan %v, want 3 limits", acme.plan)
	}
	events, bytesDay := acme.plan[1], acme.plan[2]
	if !events.IsQuota() || events.Burst() != 10000 || events.Period() != calendar.Month ||
		events.Location().String() != "Europe/Berlin" || events.InBytes() {
		t.Errorf("events: %v, want 10000 per month in Europe/Berlin", events)
	}
	if !bytesDay.IsQuota() || bytesDay.Burst() != 1<<30 || bytesDay.Period() != calendar.Day ||
		bytesDay.Location() != time.UTC || !bytesDay.InBytes() {
		t.Errorf("bytes_day: %v, want 1 GiB per day in UTC", bytesDay)
	}
	if acme.over["events"] != webhook.QuotaRefuse || acme.over["bytes_day"] != webhook.QuotaDefer ||
		len(acme.over) != 1 {
		t.Errorf("acme's policies over quota: %v, want events refuse, bytes_day defer (unset)", acme.over)
	}
}
