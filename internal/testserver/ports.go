package testserver

import (
	"testing"
	"time"
)

// StartRedisAt is StartRedis on a given loopback port, e.g. one a store
// was opened against before anything listened there. It fails t when the
// port is taken.
func StartRedisAt(t testing.TB, port int, opts ...RedisOption) *Redis {
	t.Helper()
	return startRedisAt(t, newRedisConfig(opts), t.TempDir(), port, nil)
}

func startRedisAt(t testing.TB, c redisConfig, dir string, port int, extra []string) *Redis {
	t.Helper()
	r, err := tryStartRedis(t, c, dir, port, extra)
	if err != nil {
		t.Fatalf("testserver: %s on port %d: %v", c.bin, port, err)
	}
	return r
}

// StartClusterAt is StartCluster on three given loopback ports.
func StartClusterAt(t testing.TB, ports [3]int, opts ...RedisOption) *Cluster {
	t.Helper()
	cfg := newRedisConfig(opts)
	return startCluster(t, 0, 5*time.Second, func(i int, extra []string) *Redis {
		return startRedisAt(t, cfg, t.TempDir(), ports[i], extra)
	})
}
