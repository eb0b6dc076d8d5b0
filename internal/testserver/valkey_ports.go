package testserver

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// ValkeyBinary returns the server binary the Valkey driver's tests use:
// valkey-server when it is on PATH, else redis-server (same protocol).
func ValkeyBinary() string {
	if _, err := exec.LookPath("valkey-server"); err == nil {
		return "valkey-server"
	}
	return "redis-server"
}

// StartRedisAt is StartRedis on a given loopback port, e.g. one a store
// was opened against before anything listened there. It fails t when the
// port is taken.
func StartRedisAt(t testing.TB, port int, opts ...RedisOption) *Redis {
	t.Helper()
	return startRedisAt(t, newRedisConfig(opts), t.TempDir(), port, nil)
}

func startRedisAt(t testing.TB, c redisConfig, dir string, port int, extra []string) *Redis {
	t.Helper()
	bin := Need(t, c.bin)
	r := &Redis{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Port: port,
		Password: c.password, t: t, bin: bin, dir: dir, conf: filepath.Join(dir, "redis.conf")}
	lines := []string{
		"port " + strconv.Itoa(port),
		"bind 127.0.0.1",
		"dir " + dir,
		"save \"\"",
		"appendonly no",
		"daemonize no",
		"logfile " + filepath.Join(dir, "server.log"),
	}
	if c.password != "" {
		lines = append(lines, "requirepass "+c.password, "masterauth "+c.password)
	}
	lines = append(lines, extra...)
	lines = append(lines, c.lines...)
	if err := os.WriteFile(r.conf, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatalf("testserver: %v", err)
	}
	if err := r.start(); err != nil {
		t.Fatalf("testserver: %s on port %d: %v", c.bin, port, err)
	}
	t.Cleanup(r.Stop)
	return r
}

// StartClusterAt is StartCluster on three given loopback ports.
func StartClusterAt(t testing.TB, ports [3]int, opts ...RedisOption) *Cluster {
	t.Helper()
	cfg := newRedisConfig(opts)
	c := &Cluster{}
	var busPorts []string
	for _, port := range ports {
		bus := strconv.Itoa(FreePort(t))
		lines := []string{
			"cluster-enabled yes",
			"cluster-config-file nodes.conf",
			"cluster-node-timeout 5000",
			"cluster-port " + bus,
		}
		c.Nodes = append(c.Nodes, startRedisAt(t, cfg, t.TempDir(), port, lines))
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
