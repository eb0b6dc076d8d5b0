package testserver

import (
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Sentinel is a Sentinel-managed master started for a test: a master, a
// replica of it and three Sentinels monitoring it (quorum 2), each on a
// free loopback port in a temp dir, all stopped when the test ends.
type Sentinel struct {
	// MasterName is the name the Sentinels monitor the master under:
	// "mymaster".
	MasterName string
	// Nodes are the data servers: Nodes[0] starts as the master, Nodes[1]
	// as its replica. A failover swaps the roles; Master says which is
	// the master now.
	Nodes []*Redis
	// Sentinels are the three Sentinel processes.
	Sentinels []*Redis
}

// SentinelMasterName is Sentinel.MasterName.
const SentinelMasterName = "mymaster"

// StartSentinel starts the master and its replica (options as for
// StartRedis: Binary("valkey-server") for Valkey, whose Sentinel is then
// valkey-sentinel), then three Sentinels (redis-sentinel, or the
// -sentinel beside the chosen -server binary), and waits until every
// Sentinel sees the master, the replica in sync and the two other
// Sentinels, so that SENTINEL FAILOVER can pick the replica. It skips t
// (fails it when CI is set) when a binary is not on PATH.
func StartSentinel(t testing.TB, opts ...RedisOption) *Sentinel {
	t.Helper()
	cfg := newRedisConfig(opts)
	sentinelBin := strings.TrimSuffix(cfg.bin, "-server") + "-sentinel"
	Need(t, sentinelBin)
	s := &Sentinel{MasterName: SentinelMasterName}
	// A replica's first sync starts at once, not after the master's
	// default 5s wait for more replicas (also after a failover).
	extra := []string{"repl-diskless-sync-delay 0"}
	if cfg.tls != nil {
		extra = append(extra, "tls-replication yes")
	}
	master := startRedis(t, cfg, t.TempDir(), extra)
	replicaOf := "replicaof " + hostPort(master.monitored())
	replica := startRedis(t, cfg, t.TempDir(), append(extra, replicaOf))
	s.Nodes = []*Redis{master, replica}
	for range 3 {
		s.Sentinels = append(s.Sentinels, startSentinelProc(t, sentinelBin, master, cfg))
	}
	if err := s.waitReady(60 * time.Second); err != nil {
		t.Fatalf("testserver: sentinel: %v", err)
	}
	return s
}

// monitored is the address the Sentinels monitor r at: its TLS port when
// it has one.
func (r *Redis) monitored() string {
	if r.TLSAddr != "" {
		return r.TLSAddr
	}
	return r.Addr
}

// hostPort is "HOST PORT" of "HOST:PORT", as replicaof and sentinel
// monitor take it.
func hostPort(addr string) string {
	host, port, _ := net.SplitHostPort(addr)
	return host + " " + port
}

// startSentinelProc starts one Sentinel monitoring master.
func startSentinelProc(t testing.TB, bin string, master *Redis, cfg redisConfig) *Redis {
	t.Helper()
	var last error
	for range 3 { // the free port may be taken by the time it binds it
		port := FreePort(t)
		dir := t.TempDir()
		r := &Redis{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Port: port,
			t: t, bin: Need(t, bin), dir: dir, conf: filepath.Join(dir, "sentinel.conf")}
		lines := []string{
			"port " + strconv.Itoa(port),
			"bind 127.0.0.1",
			"dir " + dir,
			"daemonize no",
			"logfile " + filepath.Join(dir, "server.log"),
		}
		if cfg.tls != nil {
			lines = append(lines, r.tlsLines(cfg)...)
			lines = append(lines, "tls-replication yes")
		}
		lines = append(lines,
			"sentinel monitor "+SentinelMasterName+" "+hostPort(master.monitored())+" 2",
			// Wide: a master slow to answer on a loaded machine must not
			// be failed over behind the test's back. SENTINEL FAILOVER
			// does not wait for it.
			"sentinel down-after-milliseconds "+SentinelMasterName+" 30000",
			"sentinel failover-timeout "+SentinelMasterName+" 60000",
			"sentinel parallel-syncs "+SentinelMasterName+" 1",
		)
		if cfg.password != "" {
			lines = append(lines, "sentinel auth-pass "+SentinelMasterName+" "+cfg.password)
		}
		if err := WriteConf(r.conf, lines); err != nil {
			t.Fatalf("testserver: %v", err)
		}
		if last = r.start(); last == nil {
			t.Cleanup(r.Stop)
			return r
		}
	}
	t.Fatalf("testserver: %s: %v", bin, last)
	return nil
}

// Addrs returns the Sentinels' "127.0.0.1:PORT" addresses for clients:
// their TLS ports with the TLS option.
func (s *Sentinel) Addrs() []string {
	out := make([]string, len(s.Sentinels))
	for i, r := range s.Sentinels {
		out[i] = r.monitored()
	}
	return out
}

// MasterAddr asks the first Sentinel which address is the master now
// (SENTINEL GET-MASTER-ADDR-BY-NAME).
func (s *Sentinel) MasterAddr() (string, error) {
	return s.masterAddrOf(s.Sentinels[0])
}

func (s *Sentinel) masterAddrOf(sentinel *Redis) (string, error) {
	v, err := sentinel.Do("SENTINEL", "GET-MASTER-ADDR-BY-NAME", s.MasterName)
	if err != nil {
		return "", err
	}
	a, ok := v.([]any)
	if !ok || len(a) != 2 {
		return "", fmt.Errorf("SENTINEL GET-MASTER-ADDR-BY-NAME: unexpected reply %v", v)
	}
	host, _ := a[0].(string)
	port, _ := a[1].(string)
	return net.JoinHostPort(host, port), nil
}

// Master returns the node the first Sentinel names as the master.
func (s *Sentinel) Master() (*Redis, error) {
	addr, err := s.MasterAddr()
	if err != nil {
		return nil, err
	}
	if n := s.node(addr); n != nil {
		return n, nil
	}
	return nil, fmt.Errorf("the master %s is none of the nodes", addr)
}

// Failover sends SENTINEL FAILOVER to the first Sentinel: it promotes the
// replica without asking the others, and the clients learn the new master
// from the Sentinels (+switch-master).
func (s *Sentinel) Failover() error {
	_, err := s.Sentinels[0].Do("SENTINEL", "FAILOVER", s.MasterName)
	return err
}

// node is the node whose plain or TLS address is addr, or nil.
func (s *Sentinel) node(addr string) *Redis {
	for _, n := range s.Nodes {
		if n.Addr == addr || n.TLSAddr == addr {
			return n
		}
	}
	return nil
}

// WaitMaster waits until every Sentinel names node n as the master and n
// says it is one (ROLE), for at most d.
func (s *Sentinel) WaitMaster(n *Redis, d time.Duration) error {
	if err := waitFor(d, 50*time.Millisecond, func() error { return s.isMaster(n) }); err != nil {
		return fmt.Errorf("%s not the master: %w", n.Addr, err)
	}
	return nil
}

func (s *Sentinel) isMaster(n *Redis) error {
	for _, sn := range s.Sentinels {
		got, err := s.masterAddrOf(sn)
		if err != nil {
			return err
		}
		if s.node(got) != n {
			return fmt.Errorf("sentinel %s names %s", sn.Addr, got)
		}
	}
	v, err := n.Do("ROLE")
	if err != nil {
		return err
	}
	if a, _ := v.([]any); len(a) == 0 || a[0] != "master" {
		return fmt.Errorf("%s answers ROLE %v", n.Addr, v)
	}
	return nil
}

// waitReady waits until every Sentinel sees the master up, the replica
// with its link to the master up, and the two other Sentinels.
func (s *Sentinel) waitReady(d time.Duration) error {
	if err := waitFor(d, 100*time.Millisecond, s.ready); err != nil {
		return fmt.Errorf("not ready: %w", err)
	}
	return nil
}

func (s *Sentinel) ready() error {
	for _, sn := range s.Sentinels {
		m, err := fieldsOf(sn.Do("SENTINEL", "MASTER", s.MasterName))
		if err != nil {
			return err
		}
		if m["flags"] != "master" || m["num-other-sentinels"] != strconv.Itoa(len(s.Sentinels)-1) ||
			m["num-slaves"] != "1" {
			return fmt.Errorf("sentinel %s sees the master as flags=%s, %s other sentinels, %s replicas",
				sn.Addr, m["flags"], m["num-other-sentinels"], m["num-slaves"])
		}
		v, err := sn.Do("SENTINEL", "REPLICAS", s.MasterName)
		if err != nil {
			return err
		}
		list, _ := v.([]any)
		if len(list) != 1 {
			return fmt.Errorf("sentinel %s lists %d replicas", sn.Addr, len(list))
		}
		r, err := fieldsOf(list[0], nil)
		if err != nil {
			return err
		}
		if r["flags"] != "slave" || r["master-link-status"] != "ok" {
			return fmt.Errorf("sentinel %s sees the replica as flags=%s, link %s", sn.Addr, r["flags"],
				r["master-link-status"])
		}
	}
	return nil
}

// fieldsOf reads a RESP2 reply of field, value pairs.
func fieldsOf(v any, err error) (map[string]string, error) {
	if err != nil {
		return nil, err
	}
	a, ok := v.([]any)
	if !ok || len(a)%2 != 0 {
		return nil, fmt.Errorf("unexpected reply %v", v)
	}
	out := make(map[string]string, len(a)/2)
	for i := 0; i < len(a); i += 2 {
		k, _ := a[i].(string)
		val, _ := a[i+1].(string)
		out[k] = val
	}
	return out, nil
}
