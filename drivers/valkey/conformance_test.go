package valkey

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore/conformance"
	"github.com/fleetstore/fleetstore/internal/scripts"
	"github.com/fleetstore/fleetstore/internal/testing/testserver"
)

// serverBinary is the server every test of this package starts:
// valkey-server when it is on PATH, else redis-server 7 (same protocol).
var serverBinary = testserver.ValkeyBinary()

func TestMain(m *testing.M) {
	version := "not found"
	if out, err := exec.Command(serverBinary, "--version").Output(); err == nil {
		version = strings.TrimSpace(string(out))
	}
	fmt.Printf("drivers/valkey tests use %s: %s\n", serverBinary, version)
	os.Exit(m.Run())
}

// startServer starts one server of serverBinary and says which.
func startServer(t *testing.T, opts ...testserver.RedisOption) *testserver.Redis {
	t.Helper()
	r := testserver.StartRedis(t, append([]testserver.RedisOption{testserver.Binary(serverBinary)}, opts...)...)
	t.Logf("server: %s on %s", serverBinary, r.Addr)
	return r
}

// startCluster starts a 3-master cluster of serverBinary and says which.
func startCluster(t *testing.T) *testserver.Cluster {
	t.Helper()
	c := testserver.StartCluster(t, testserver.Binary(serverBinary))
	t.Logf("cluster: %s on %v", serverBinary, c.Addrs())
	return c
}

func addrURL(addr string) string { return "valkey://" + addr }

func TestConformanceSingle(t *testing.T) {
	t.Parallel()
	r := startServer(t)
	nodes := []*testserver.Redis{r}
	conformance.Run(t, conformance.Config{
		URL:          addrURL(r.Addr),
		Records:      recordsOn(nodes),
		Restart:      r.Restart,
		FlushScripts: r.FlushScripts,
	})
}

func TestConformanceCluster(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	conformance.Run(t, conformance.Config{
		URL:          c.URLScheme("valkey"),
		AddrURL:      addrURL,
		Records:      recordsOn(c.Nodes),
		Restart:      c.Restart,
		FlushScripts: c.FlushScripts,
	})
}

// recordsOn lists tenant's keys under prefix on every node (SCAN MATCH)
// with their PTTL, for G7 and C9: a claim shard as its live records, each
// with its own expiry.
func recordsOn(nodes []*testserver.Redis) func(context.Context, string, string) ([]conformance.Record, error) {
	return func(_ context.Context, prefix, tenant string) ([]conformance.Record, error) {
		pattern := scripts.TenantPattern(prefix, tenant)
		var out []conformance.Record
		for _, n := range nodes {
			cursor := "0"
			for {
				v, err := n.Do("SCAN", cursor, "MATCH", pattern, "COUNT", "1000")
				if err != nil {
					return nil, err
				}
				page, ok := v.([]any)
				if !ok || len(page) != 2 {
					return nil, fmt.Errorf("SCAN on %s: unexpected reply %v", n.Addr, v)
				}
				cursor, _ = page[0].(string)
				keys, _ := page[1].([]any)
				for _, k := range keys {
					key, _ := k.(string)
					if scripts.IsShardKey(key) {
						recs, err := shardRecords(n, key)
						if err != nil {
							return nil, err
						}
						out = append(out, recs...)
						continue
					}
					v, err := n.Do("PTTL", key)
					if err != nil {
						return nil, err
					}
					ms, _ := v.(int64)
					switch {
					case ms == -2: // gone since SCAN saw it
					case ms < 0:
						out = append(out, conformance.Record{Key: key, TTL: -1})
					default:
						out = append(out, conformance.Record{Key: key, TTL: time.Duration(ms) * time.Millisecond})
					}
				}
				if cursor == "0" || cursor == "" {
					break
				}
			}
		}
		return out, nil
	}
}

// shardRecords reads claim shard key on n: its live records, each with its
// own time to live on the server's clock (scripts.ShardRecords).
func shardRecords(n *testserver.Redis, key string) ([]conformance.Record, error) {
	v, err := n.Do("TIME")
	if err != nil {
		return nil, err
	}
	tm, _ := v.([]any)
	if len(tm) != 2 {
		return nil, fmt.Errorf("TIME on %s: unexpected reply %v", n.Addr, v)
	}
	sec, err1 := strconv.ParseInt(fmt.Sprint(tm[0]), 10, 64)
	us, err2 := strconv.ParseInt(fmt.Sprint(tm[1]), 10, 64)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("TIME on %s: unexpected reply %v", n.Addr, v)
	}
	if v, err = n.Do("HGETALL", key); err != nil {
		return nil, err
	}
	var kv []string
	switch a := v.(type) {
	case []any:
		for _, e := range a {
			s, _ := e.(string)
			kv = append(kv, s)
		}
	case map[any]any: // RESP3
		for f, e := range a {
			fs, _ := f.(string)
			es, _ := e.(string)
			kv = append(kv, fs, es)
		}
	default:
		return nil, fmt.Errorf("HGETALL on %s: unexpected reply %T", n.Addr, v)
	}
	return scripts.ShardRecords(key, kv, sec*1e6+us), nil
}
