package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore/internal/testing/testserver"
	"github.com/fleetstore/fleetstore/webhook/webhooktest"
)

// serveNode is one `fleetstore serve` process of a test: the test binary
// run as the command (asCommand).
type serveNode struct {
	name   string
	url    string // http://127.0.0.1:PORT
	dir    string // its sink, access log and outbox
	cmd    *exec.Cmd
	stderr *syncBuffer
	exited chan struct{}
	err    error // the exit status, once exited
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// startServe starts `fleetstore serve -config path` with env added, and
// waits for its "listening" line (its listen address is 127.0.0.1:0).
func startServe(t *testing.T, name, path, dir string, env ...string) *serveNode {
	t.Helper()
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	n := &serveNode{name: name, dir: dir, stderr: &syncBuffer{}, exited: make(chan struct{})}
	n.cmd = exec.Command(bin, "serve", "-config", path)
	n.cmd.Env = append(append(os.Environ(), asCommand+"=1"), env...)
	n.cmd.Stdout = io.Discard
	pipe, err := n.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(n.stderr, line)
			var l struct{ Msg, Field, Addr string }
			if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "listening" && l.Field == "listen" {
				addr <- l.Addr
			}
		}
		n.err = n.cmd.Wait()
		close(n.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-n.exited:
		default:
			_ = n.cmd.Process.Kill()
			<-n.exited
		}
		if t.Failed() {
			t.Logf("%s's log:\n%s", name, n.stderr.String())
		}
	})
	select {
	case a := <-addr:
		n.url = "http://" + a
	case <-n.exited:
		t.Fatalf("%s exited at start (%v): %s", name, n.err, n.stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: no listening line in 30s: %s", name, n.stderr.String())
	}
	return n
}

// stop sends SIGTERM and waits for the exit, which must be 0.
func (n *serveNode) stop(t *testing.T) {
	t.Helper()
	if err := n.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-n.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: still running 30s after SIGTERM", n.name)
	}
	if n.err != nil {
		t.Errorf("%s: exit %v after SIGTERM, want 0", n.name, n.err)
	}
}

// readiness reads the node's /readyz.
func (n *serveNode) readiness(t *testing.T) readiness {
	t.Helper()
	resp, err := http.Get(n.url + "/readyz")
	if err != nil {
		t.Fatalf("%s /readyz: %v", n.name, err)
	}
	defer resp.Body.Close()
	var r readiness
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%s /readyz: %d, %v", n.name, resp.StatusCode, err)
	}
	return r
}

// metric is the sum of the samples of the node's /metrics whose name
// matches name (a regexp of the whole name); -1 when there is none.
func (n *serveNode) metric(t *testing.T, name string) float64 {
	t.Helper()
	resp, err := http.Get(n.url + "/metrics")
	if err != nil {
		t.Fatalf("%s /metrics: %v", n.name, err)
	}
	defer resp.Body.Close()
	re := regexp.MustCompile(`^(?:` + name + `)(?:\{.*\})? (\S+)$`)
	sum, found := 0.0, false
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			v, _ := strconv.ParseFloat(m[1], 64)
			sum, found = sum+v, true
		}
	}
	if !found {
		return -1
	}
	return sum
}

// sent is one delivery the test made and what it was answered.
type sent struct {
	provider, tenant, id string
	node                 int
	status               int
	forged               bool
}

func (s sent) key() string { return s.provider + "/" + s.tenant + "/" + s.id }

// TestServeFleetThroughOutage is the end-to-end run: three serve
// nodes on one redis-server, signed deliveries (fresh, redelivered to the
// other nodes, a burst over a plan, forged), the store killed (SIGKILL)
// and restarted mid-run, one node stopped during the outage and started
// again after it. Every delivery answered 2xx is in a sink once,
// or once more per conflict the replay reported for it; nothing forged
// or refused is stored; /readyz and /metrics show the outage and its end;
// every node stops on SIGTERM with exit status 0.
func TestServeFleetThroughOutage(t *testing.T) {
	redis := testserver.StartRedis(t, testserver.ConfigLines("appendonly yes", "appendfsync always"))
	secrets := map[string]string{
		"ACME_GH": "acme-github-secret", "ACME_STRIPE": "whsec_acme-stripe-secret",
		"INITECH_GH": "initech-github-secret", "INITECH_STRIPE": "whsec_initech-stripe-secret",
	}
	var env []string
	for k, v := range secrets {
		env = append(env, k+"="+v)
	}
	const nodes = 3
	var (
		fleet   []*serveNode
		configs []string
	)
	for i := range nodes {
		dir := t.TempDir()
		path := writeConfig(t, fmt.Sprintf(`listen: 127.0.0.1:0
node: node-%d
access_log: %s
store:
  url: %s/0?timeout=1s
degraded:
  nodes: %d
  outbox_dir: %s
plans:
  free:
    - {kind: hooks, n: 1, per: 1h, burst: 3}
  pro:
    - {kind: hooks, n: 1000, burst: 1000}
tenants:
  acme:
    plan: pro
    secrets: {github: env:ACME_GH, stripe: env:ACME_STRIPE}
  initech:
    plan: free
    secrets: {github: env:INITECH_GH, stripe: env:INITECH_STRIPE}
endpoints:
  - {path: "/hooks/github/{tenant}", provider: github}
  - {path: "/hooks/stripe/{tenant}", provider: stripe}
sink:
  file: {path: %s}
`, i, filepath.Join(dir, "access.log"), redis.URL(), nodes, filepath.Join(dir, "outbox"),
			filepath.Join(dir, "hooks.jsonl")))
		configs = append(configs, path)
		fleet = append(fleet, startServe(t, fmt.Sprintf("node-%d", i), path, dir, env...))
	}

	client := &http.Client{Timeout: 20 * time.Second}
	var log []sent
	send := func(provider, tenant, id string, node int, forged bool) sent {
		t.Helper()
		secret := secrets[strings.ToUpper(tenant)+"_"+map[string]string{"github": "GH", "stripe": "STRIPE"}[provider]]
		body := fmt.Sprintf(`{"id":%q,"object":"event","type":"test"}`, id)
		if forged {
			secret, body = "not-"+secret, fmt.Sprintf(`{"id":%q,"object":"event","type":"FORGED"}`, id)
		}
		req, err := webhooktest.Sign(provider, webhooktest.Delivery{
			URL: fleet[node].url + "/hooks/" + provider + "/" + tenant, Body: []byte(body), Secret: secret, ID: id})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s to node %d: %v", provider, id, node, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		s := sent{provider: provider, tenant: tenant, id: id, node: node, status: resp.StatusCode, forged: forged}
		if resp.StatusCode >= 500 {
			t.Errorf("%s answered %d by node %d", s.key(), resp.StatusCode, node)
		}
		log = append(log, s)
		return s
	}
	expect := func(s sent, want int, what string) {
		t.Helper()
		if s.status != want {
			t.Errorf("%s (%s) to node %d: %d, want %d", s.key(), what, s.node, s.status, want)
		}
	}
	providers := []string{"github", "stripe"}

	// The store up: fresh deliveries, each then redelivered to the next node.
	for i := range 12 {
		p := providers[i%2]
		expect(send(p, "acme", fmt.Sprintf("up-%d", i), i%nodes, false), http.StatusAccepted, "fresh")
		expect(send(p, "acme", fmt.Sprintf("up-%d", i), (i+1)%nodes, false), http.StatusOK, "redelivered")
	}
	// A burst over initech's plan (3 hooks an hour, shared by its
	// endpoints): Stripe retries, so 429 past the burst; GitHub does not,
	// so stored deferred.
	var burst202, burst429 int
	for i := range 8 {
		switch send("stripe", "initech", fmt.Sprintf("burst-%d", i), i%nodes, false).status {
		case http.StatusAccepted:
			burst202++
		case http.StatusTooManyRequests:
			burst429++
		}
	}
	if burst202 != 3 || burst429 != 5 {
		t.Errorf("initech's Stripe burst of 8: %d accepted, %d refused 429; want 3 and 5", burst202, burst429)
	}
	for i := range 4 {
		expect(send("github", "initech", fmt.Sprintf("deferred-%d", i), i%nodes, false), http.StatusAccepted, "deferred")
	}
	// Forged: a wrong secret, for new events and for a stored one.
	for i := range 4 {
		expect(send(providers[i%2], "acme", fmt.Sprintf("forged-%d", i), i%nodes, true), http.StatusUnauthorized, "forged")
	}
	expect(send("github", "acme", "up-0", 2, true), http.StatusUnauthorized, "forged redelivery")
	for i, n := range fleet {
		if r := n.readiness(t); r.Degraded || r.Outages != 0 {
			t.Errorf("node %d before the outage: %+v", i, r)
		}
	}

	// The store killed: every node decides locally, at a third of each limit.
	if err := redis.Kill(); err != nil {
		t.Fatal(err)
	}
	for i := range 9 {
		expect(send(providers[i%2], "acme", fmt.Sprintf("out-%d", i), i%nodes, false), http.StatusAccepted, "fresh, store out")
	}
	// Redelivered to the node that stored it: a Duplicate from its own state.
	for i := range 3 {
		expect(send(providers[i%2], "acme", fmt.Sprintf("out-%d", i), i%nodes, false), http.StatusOK, "redelivered to its node, store out")
	}
	// Redelivered to other nodes, which know nothing of them: stored again,
	// and reported as conflicts when replayed.
	for i := range 3 {
		send(providers[i%2], "acme", fmt.Sprintf("out-%d", i), (i+1)%nodes, false)
		send(providers[i%2], "acme", fmt.Sprintf("up-%d", i), (i+2)%nodes, false)
	}
	expect(send("stripe", "acme", "forged-out", 0, true), http.StatusUnauthorized, "forged, store out")
	for i, n := range fleet {
		r := n.readiness(t)
		if !r.Degraded || r.Outbox == 0 || r.Outages != 1 {
			t.Errorf("node %d during the outage: %+v, want degraded, commits in its outbox, 1 outage", i, r)
		}
		if g := n.metric(t, `fleetstore_client_degraded\w*`); g != 1 {
			t.Errorf("node %d during the outage: the degraded gauge scrapes %v, want 1", i, g)
		}
	}

	// Node 0 stopped (SIGTERM) while the store is out: it exits 0, its
	// outbox on disk.
	fleet[0].stop(t)
	if left, _ := os.ReadDir(filepath.Join(fleet[0].dir, "outbox")); len(left) == 0 {
		t.Error("node 0 stopped during the outage: its outbox directory is empty")
	}

	// The store back (its append-only file kept the commits made before):
	// each node replays its outbox and decides shared again, node 0 once
	// started again on its directory.
	if err := redis.Restart(); err != nil {
		t.Fatal(err)
	}
	fleet[0] = startServe(t, "node-0 again", configs[0], fleet[0].dir, env...)
	deadline := time.Now().Add(30 * time.Second)
	for i, n := range fleet {
		for {
			r := n.readiness(t)
			if !r.Degraded && r.Outbox == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d 30s after the store's restart: %+v", i, r)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if g := n.metric(t, `fleetstore_client_degraded\w*`); g != 0 {
			t.Errorf("node %d after the outage: the degraded gauge scrapes %v, want 0", i, g)
		}
		if o := n.metric(t, `fleetstore_client_outages\w*`); o != 1 && i != 0 { // node 0's process is new
			t.Errorf("node %d after the outage: the outages counter scrapes %v, want 1", i, o)
		}
	}
	// Every delivery stored before or during the outage is now a
	// Duplicate on every node.
	stored := map[string]bool{}
	for _, s := range log {
		if s.status == http.StatusAccepted && !s.forged {
			stored[s.key()] = true
		}
	}
	for _, s := range append([]sent(nil), log...) {
		if stored[s.key()] && s.status == http.StatusAccepted {
			expect(send(s.provider, s.tenant, s.id, (s.node+1)%nodes, false), http.StatusOK, "redelivered after the outage")
		}
	}
	var conflictsScraped float64
	for _, n := range fleet {
		conflictsScraped += n.metric(t, `fleetstore_client_conflicts\w*`)
		n.stop(t)
	}

	// The sinks and the conflicts the access logs report.
	inSinks, deferred, conflicts := map[string]int{}, map[string]bool{}, map[string]int{}
	totalConflicts, accessLines := 0, 0
	for _, n := range fleet {
		for _, line := range readLines(t, filepath.Join(n.dir, "hooks.jsonl")) {
			var r hookRecord
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatalf("%s's sink: %v: %q", n.name, err, line)
			}
			k := r.Provider + "/" + r.Tenant + "/" + r.EventID
			inSinks[k]++
			deferred[k] = r.Deferred
			if strings.Contains(r.Body, "FORGED") {
				t.Errorf("%s: a forged body stored", k)
			}
		}
		for _, line := range readLines(t, filepath.Join(n.dir, "access.log")) {
			var l struct {
				Msg, Provider, Tenant string
				EventID               string `json:"event_id"`
			}
			if err := json.Unmarshal([]byte(line), &l); err != nil {
				t.Fatalf("%s's access log: %v", n.name, err)
			}
			if l.Msg == "delivery" {
				accessLines++
			}
			if l.Msg == "conflict" {
				conflicts[l.Provider+"/"+l.Tenant+"/"+l.EventID]++
				totalConflicts++
			}
		}
		for _, secret := range secrets {
			if strings.Contains(n.stderr.String(), secret) {
				t.Errorf("%s's log holds a secret", n.name)
			}
		}
	}
	answered2xx := map[string]bool{}
	for _, s := range log {
		if s.status >= 200 && s.status < 300 && !s.forged {
			answered2xx[s.key()] = true
		}
	}
	for k := range answered2xx {
		if inSinks[k] != 1+conflicts[k] {
			t.Errorf("%s: answered 2xx, in the sinks %d times, with %d conflicts", k, inSinks[k], conflicts[k])
		}
	}
	for k := range inSinks {
		if !answered2xx[k] {
			t.Errorf("%s: in a sink, never answered 2xx", k)
		}
	}
	for i := range 4 {
		if k := fmt.Sprintf("github/initech/deferred-%d", i); !deferred[k] {
			t.Errorf("%s: not stored as deferred", k)
		}
	}
	if totalConflicts == 0 || float64(totalConflicts) != conflictsScraped {
		t.Errorf("conflicts: %d in the access logs, %v scraped; want the same, at least one", totalConflicts, conflictsScraped)
	}
	if accessLines != len(log) {
		t.Errorf("%d access-log lines of deliveries, want one per delivery: %d", accessLines, len(log))
	}
	t.Logf("%d deliveries, %d events stored, %d conflicts", len(log), len(inSinks), totalConflicts)
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}
