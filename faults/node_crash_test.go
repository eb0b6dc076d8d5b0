package faults

import (
	"bufio"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/internal/testing/testchild"
	"github.com/fleetstore/fleetstore/nettest"
)

// The node process: this test binary run again with nodeEnv set to a mode
// and nodeURL to the Store's URL.
const (
	nodeEnv    = "FAULTS_NODE"
	nodeURL    = "FAULTS_NODE_URL"
	nodeTenant = "FAULTS_NODE_TENANT"
)

// TestNodeProcess is the node's body, not a test: it returns at once in a
// normal run. Modes:
//
//   - accept: 8 goroutines accept hooks (a Hit with a claim, then its
//     Commit) until killed, printing "accepted KEY HOOK" once Commit
//     returned nil, as a webhook handler answers 2xx;
//   - replay: wait (≤ 20s) until the Store decides shared with an empty
//     outbox, print "replayed" and close.
func TestNodeProcess(t *testing.T) {
	mode := os.Getenv(nodeEnv)
	if mode == "" {
		return
	}
	st, err := fleetstore.Open(os.Getenv(nodeURL))
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(2)
	}
	var mu sync.Mutex
	report := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		_, _ = fmt.Fprintf(os.Stdout, format, args...) // one write: one line
	}
	report("open\n")
	ctx := context.Background()
	switch mode {
	case "accept":
		tenant := os.Getenv(nodeTenant)
		deadline := time.Now().Add(2 * time.Minute)
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				for i := 0; time.Now().Before(deadline); i++ {
					c := fleetstore.Claim{Tenant: tenant, SourceID: "github",
						Key: fmt.Sprintf("evt-%d-%d", g, i), HookID: fmt.Sprintf("hook-%d-%d", g, i),
						Node: "node", TTL: time.Hour, PendingTTL: 30 * time.Second}
					res, err := st.Hit(ctx, []fleetstore.Charge{{Kind: fleetstore.Hooks, Tenant: tenant,
						Increment: time.Microsecond, Capacity: time.Hour}}, &c)
					if err != nil || res.Outcome != fleetstore.OK || !res.Local {
						report("error hit %+v %v\n", res, err)
						return
					}
					if err := st.Commit(ctx, c); err != nil {
						report("error commit %v\n", err)
						return
					}
					report("accepted %s %s\n", c.Key, c.HookID)
				}
			})
		}
		wg.Wait()
	case "replay":
		deadline := time.Now().Add(20 * time.Second)
		for {
			s := st.FallbackStats()
			if !s.Degraded && s.Outbox == 0 {
				report("replayed %d\n", s.Replayed)
				break
			}
			if time.Now().After(deadline) {
				report("error not replayed: %+v\n", s)
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	_ = st.Close()
	os.Exit(0)
}

// node starts the node process in mode on rawURL and returns it once its
// Store is open, with its stdout.
func node(t *testing.T, mode, rawURL, tenant string) (*exec.Cmd, *bufio.Scanner) {
	t.Helper()
	cmd, lines, _ := testchild.Start(t, "TestNodeProcess",
		nodeEnv+"="+mode, nodeURL+"="+rawURL, nodeTenant+"="+tenant)
	return cmd, lines
}

// TestNodeKilledMidOutage: a node process whose path to the shared store
// is refused accepts hooks (local Hit, Commit queued) and is killed with
// SIGKILL once it has accepted 3 000; the path comes back and the node is
// started again on the same outbox directory. Every hook it reported
// accepted is then committed in the shared store (a claim-only Hit of
// another hook on its key is a Duplicate of it): 0 lost with
// fallback_outbox_dir. Without it the figure is measured, not asserted
// (all of them, as the outbox lived in the killed process).
func TestNodeKilledMidOutage(t *testing.T) {
	const accept = 3000
	srv := startRedis(t, "redis-server")
	for _, disk := range []bool{true, false} {
		name := "memory"
		if disk {
			name = "disk"
		}
		t.Run(name, func(t *testing.T) {
			prefix, tenant := randomName("crash-node-"), randomName("tenant-")
			addr := nettest.RefusedAddr(t) // the node's path: refused until the proxy starts
			q := "timeout=200ms&fallback_nodes=1&key_prefix=" + prefix
			if disk {
				q += "&fallback_outbox_dir=" + url.QueryEscape(t.TempDir())
			}
			rawURL := "redis://" + addr + "/0?" + q

			start := time.Now()
			cmd, lines := node(t, "accept", rawURL, tenant)
			accepted := make(map[string]string) // key: hook
			read := func(line string) {
				var key, hook string
				if _, err := fmt.Sscanf(line, "accepted %s %s", &key, &hook); err != nil {
					t.Fatalf("node: %q", line)
				}
				accepted[key] = hook
			}
			for len(accepted) < accept && lines.Scan() {
				read(lines.Text())
			}
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			for lines.Scan() { // what it wrote before it died
				read(lines.Text())
			}
			if err := cmd.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
				t.Fatalf("node: %v, want killed", err)
			}
			acceptTook := time.Since(start)

			nettest.NewProxyAt(t, addr, srv.Addr(), nil) // the path is back
			restarted := time.Now()
			cmd, lines = node(t, "replay", rawURL, tenant)
			if !lines.Scan() || !strings.HasPrefix(lines.Text(), "replayed ") {
				t.Fatalf("restarted node: %q %v", lines.Text(), lines.Err())
			}
			if err := cmd.Wait(); err != nil {
				t.Fatalf("restarted node: %v", err)
			}
			replayTook := time.Since(restarted)

			reader := openStoreAt(t, targets[0], srv.Addr(), "timeout=2s&key_prefix="+prefix)
			lost := 0
			ctx := context.Background()
			for key, hook := range accepted {
				c := fleetstore.Claim{Tenant: tenant, SourceID: "github", Key: key, HookID: "redelivery",
					Node: "reader", TTL: time.Hour, PendingTTL: time.Second}
				res, err := reader.Hit(ctx, nil, &c)
				if err != nil {
					t.Fatalf("reading back %s: %v", key, err)
				}
				if res.Outcome != fleetstore.Duplicate || res.HookID != hook {
					lost++
				}
			}
			t.Logf("FIGURE node_kill outbox=%s accepted=%d lost=%d accept_took=%v restart_to_replayed=%v",
				name, len(accepted), lost, acceptTook.Round(time.Millisecond), replayTook.Round(time.Millisecond))
			if disk && lost > 0 {
				t.Errorf("%d of %d hooks accepted before the kill are not committed in the shared store, want 0",
					lost, len(accepted))
			}
			if !disk && lost == 0 {
				t.Errorf("no hook lost without the disk outbox: the kill did not hit the outage")
			}
		})
	}
}
