package testserver

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Cluster is a Redis Cluster of three masters (no replicas) started for a
// test: cluster-enabled servers on free loopback ports, every one of the
// 16384 slots assigned, cluster_state:ok on every node. It is stopped when
// the test ends.
type Cluster struct {
	Nodes []*Redis
}

// clusterSlots is the number of hash slots of a Redis Cluster.
const clusterSlots = 16384

// StartCluster starts three cluster-enabled masters (options as for
// StartRedis: Binary("valkey-server") for Valkey), joins them with CLUSTER
// MEET, splits the slots between them and waits until the cluster is ok.
func StartCluster(t testing.TB, opts ...RedisOption) *Cluster {
	t.Helper()
	cfg := newRedisConfig(opts)
	return startCluster(t, func(_ int, extra []string) *Redis {
		return startRedis(t, cfg, t.TempDir(), extra)
	})
}

// startCluster starts three cluster-enabled nodes with start, joins them
// and assigns every slot, and waits for cluster_state:ok.
func startCluster(t testing.TB, start func(i int, extra []string) *Redis) *Cluster {
	t.Helper()
	c := &Cluster{}
	var busPorts []string
	for i := range 3 {
		// The bus port is chosen too: PORT+10000 may be taken.
		bus := strconv.Itoa(FreePort(t))
		lines := []string{
			"cluster-enabled yes",
			"cluster-config-file nodes.conf",
			"cluster-node-timeout 5000",
			"cluster-port " + bus,
		}
		c.Nodes = append(c.Nodes, start(i, lines))
		busPorts = append(busPorts, bus)
	}
	first := c.Nodes[0]
	for i, n := range c.Nodes[1:] {
		if _, err := first.Do("CLUSTER", "MEET", "127.0.0.1", strconv.Itoa(n.Port), busPorts[i+1]); err != nil {
			t.Fatalf("testserver: cluster meet: %v", err)
		}
	}
	for i, n := range c.Nodes {
		lo, hi := i*clusterSlots/3, (i+1)*clusterSlots/3-1
		if err := addSlots(n, lo, hi); err != nil {
			t.Fatalf("testserver: cluster addslots: %v", err)
		}
	}
	if err := c.WaitOK(30 * time.Second); err != nil {
		t.Fatalf("testserver: %v", err)
	}
	return c
}

// addSlots assigns slots lo..hi to n: ADDSLOTSRANGE (Redis 7), else
// ADDSLOTS with every slot listed.
func addSlots(n *Redis, lo, hi int) error {
	_, err := n.Do("CLUSTER", "ADDSLOTSRANGE", strconv.Itoa(lo), strconv.Itoa(hi))
	if err == nil || !strings.Contains(strings.ToLower(err.Error()), "unknown") {
		return err
	}
	args := []string{"CLUSTER", "ADDSLOTS"}
	for s := lo; s <= hi; s++ {
		args = append(args, strconv.Itoa(s))
	}
	_, err = n.Do(args...)
	return err
}

// WaitOK waits until every node reports cluster_state:ok with all slots
// assigned and every node known, for at most d.
func (c *Cluster) WaitOK(d time.Duration) error {
	if err := waitFor(d, 50*time.Millisecond, c.ok); err != nil {
		return fmt.Errorf("cluster not ok: %w", err)
	}
	return nil
}

func (c *Cluster) ok() error {
	for _, n := range c.Nodes {
		v, err := n.Do("CLUSTER", "INFO")
		if err != nil {
			return err
		}
		info, _ := v.(string)
		for field, want := range map[string]string{
			"cluster_state":          "ok",
			"cluster_slots_assigned": strconv.Itoa(clusterSlots),
			"cluster_slots_ok":       strconv.Itoa(clusterSlots),
			"cluster_known_nodes":    strconv.Itoa(len(c.Nodes)),
		} {
			if got := InfoField(info, field); got != want {
				return fmt.Errorf("node %s: %s is %q, want %q", n.Addr, field, got, want)
			}
		}
		v, err = n.Do("CLUSTER", "SLOTS")
		if err != nil {
			return err
		}
		if ranges, _ := v.([]any); len(ranges) != len(c.Nodes) {
			return fmt.Errorf("node %s: CLUSTER SLOTS lists %d ranges, want %d", n.Addr, len(ranges), len(c.Nodes))
		}
	}
	return nil
}

// Addrs returns the nodes' "127.0.0.1:PORT" addresses.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.Addr
	}
	return out
}

// URL returns "redis+cluster://[:PASSWORD@]NODE1?addr=NODE2&addr=NODE3".
func (c *Cluster) URL() string {
	return c.URLScheme("redis+cluster")
}

// URLScheme is URL with another scheme (e.g. "valkey").
func (c *Cluster) URLScheme(scheme string) string {
	u := url.URL{Scheme: scheme, Host: c.Nodes[0].Addr}
	if p := c.Nodes[0].Password; p != "" {
		u.User = url.UserPassword("", p)
	}
	var q []string
	for _, n := range c.Nodes[1:] {
		q = append(q, "addr="+n.Addr)
	}
	u.RawQuery = strings.Join(q, "&")
	return u.String()
}

// DoAll sends one command to every node.
func (c *Cluster) DoAll(args ...string) error {
	var errs []error
	for _, n := range c.Nodes {
		if _, err := n.Do(args...); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", n.Addr, err))
		}
	}
	return errors.Join(errs...)
}

// Restart restarts every node on its port (their slots survive in
// nodes.conf) and waits until the cluster is ok again.
func (c *Cluster) Restart() error {
	var wg sync.WaitGroup
	errs := make([]error, len(c.Nodes))
	for i, n := range c.Nodes {
		wg.Go(func() { errs[i] = n.Restart() })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return c.WaitOK(30 * time.Second)
}
