package testserver

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Cluster is a Redis Cluster of three masters, and one replica of each
// when started by StartClusterReplicas, started for a test:
// cluster-enabled servers on free loopback ports, every one of the 16384
// slots assigned, cluster_state:ok on every node. It is stopped when the
// test ends.
type Cluster struct {
	Nodes    []*Redis // the masters, as started
	Replicas []*Redis // Replicas[i] replicates Nodes[i]; nil without replicas
}

// clusterSlots is the number of hash slots of a Redis Cluster.
const clusterSlots = 16384

// StartCluster starts three cluster-enabled masters (options as for
// StartRedis: Binary("valkey-server") for Valkey), joins them with CLUSTER
// MEET, splits the slots between them and waits until the cluster is ok.
func StartCluster(t testing.TB, opts ...RedisOption) *Cluster {
	t.Helper()
	cfg := newRedisConfig(opts)
	return startCluster(t, 0, 5*time.Second, true, func(_ int, extra []string) *Redis {
		return startRedis(t, cfg, t.TempDir(), extra)
	})
}

// StartClusterReplicas is StartCluster with one replica per master and the
// given cluster-node-timeout (how long a master may be unreachable before
// its replica is promoted).
func StartClusterReplicas(t testing.TB, nodeTimeout time.Duration, opts ...RedisOption) *Cluster {
	t.Helper()
	cfg := newRedisConfig(opts)
	return startCluster(t, 1, nodeTimeout, true, func(_ int, extra []string) *Redis {
		return startRedis(t, cfg, t.TempDir(), extra)
	})
}

// startCluster starts three cluster-enabled masters and replicas replicas
// of each with start, joins them, assigns every slot, and waits for
// cluster_state:ok and every replica's link to its master. A cluster that
// does not form is stopped and started again, on new ports, twice at most
// (once only when start uses given ports: retry is false).
func startCluster(t testing.TB, replicas int, nodeTimeout time.Duration, retry bool,
	start func(i int, extra []string) *Redis) *Cluster {
	t.Helper()
	attempts := 1
	if retry {
		attempts = 3
	}
	var err error
	for range attempts {
		var c *Cluster
		if c, err = formCluster(t, replicas, nodeTimeout, start); err == nil {
			return c
		}
		t.Logf("testserver: cluster did not form: %v", err)
	}
	t.Fatalf("testserver: %v", err)
	return nil
}

// formCluster is one attempt of startCluster; on error it has stopped
// every node it started.
func formCluster(t testing.TB, replicas int, nodeTimeout time.Duration,
	start func(i int, extra []string) *Redis) (c *Cluster, err error) {
	t.Helper()
	c = &Cluster{}
	var busPorts []string
	var all []*Redis
	defer func() {
		if err != nil {
			for _, n := range all {
				n.Stop()
			}
		}
	}()
	for i := range 3 * (1 + replicas) {
		// The bus port is chosen too: PORT+10000 may be taken.
		bus := strconv.Itoa(FreePort(t))
		lines := []string{
			"cluster-enabled yes",
			"cluster-config-file nodes.conf",
			"cluster-node-timeout " + strconv.FormatInt(nodeTimeout.Milliseconds(), 10),
			"cluster-port " + bus,
			// A replica's first sync starts at once, not after the
			// master's default 5s wait for more replicas.
			"repl-diskless-sync-delay 0",
		}
		n := start(i, lines)
		all = append(all, n)
		if i < 3 {
			c.Nodes = append(c.Nodes, n)
		} else {
			c.Replicas = append(c.Replicas, n)
		}
		busPorts = append(busPorts, bus)
	}
	first := all[0]
	for i, n := range all[1:] {
		port := strconv.Itoa(n.Port)
		if _, err := first.Do("CLUSTER", "MEET", "127.0.0.1", port, busPorts[i+1]); err != nil {
			return nil, fmt.Errorf("cluster meet: %w", err)
		}
	}
	for i, n := range c.Nodes {
		lo, hi := i*clusterSlots/3, (i+1)*clusterSlots/3-1
		if err := addSlots(n, lo, hi); err != nil {
			return nil, fmt.Errorf("cluster addslots: %w", err)
		}
	}
	for i, r := range c.Replicas {
		if err := replicate(r, c.Nodes[i%3]); err != nil {
			return nil, fmt.Errorf("cluster replicate: %w", err)
		}
	}
	if err := c.WaitOK(30 * time.Second); err != nil {
		return nil, err
	}
	return c, nil
}

// replicate makes r a replica of master, once r knows master (the MEET
// spreads by gossip), and waits for the replication link.
func replicate(r, master *Redis) error {
	id, err := master.Do("CLUSTER", "MYID")
	if err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err = r.Do("CLUSTER", "REPLICATE", fmt.Sprint(id))
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		return err
	}
	for {
		info, err := r.Info("replication")
		if err == nil && InfoField(info, "master_link_status") == "up" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("replica %s: no link to master %s after 30s", r.Addr, master.Addr)
		}
		time.Sleep(50 * time.Millisecond)
	}
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
	all := append(slices.Clone(c.Nodes), c.Replicas...)
	for _, n := range all {
		v, err := n.Do("CLUSTER", "INFO")
		if err != nil {
			return err
		}
		info, _ := v.(string)
		for field, want := range map[string]string{
			"cluster_state":          "ok",
			"cluster_slots_assigned": strconv.Itoa(clusterSlots),
			"cluster_slots_ok":       strconv.Itoa(clusterSlots),
			"cluster_known_nodes":    strconv.Itoa(len(c.Nodes) + len(c.Replicas)),
		} {
			got := InfoField(info, field)
			if k, _ := strconv.Atoi(got); field == "cluster_known_nodes" && k > len(all) {
				return fmt.Errorf("node %s knows %d nodes, not %d: it met a stranger (%w)",
					n.Addr, k, len(all), errFinal)
			}
			if got != want {
				return fmt.Errorf("node %s: %s is %q, want %q", n.Addr, field, got, want)
			}
		}
		v, err = n.Do("CLUSTER", "SLOTS")
		if err != nil {
			return err
		}
		if ranges, _ := v.([]any); len(ranges) != len(c.Nodes) {
			return fmt.Errorf("node %s: CLUSTER SLOTS lists %d ranges, want %d", n.Addr, len(ranges),
				len(c.Nodes))
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

// FlushScripts empties every master's script cache and removes its
// function libraries (Redis.FlushScripts).
func (c *Cluster) FlushScripts() error {
	var errs []error
	for _, n := range c.Nodes {
		if err := n.FlushScripts(); err != nil {
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
