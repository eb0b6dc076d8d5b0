package testserver

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
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
	return startCluster(t, 0, 5*time.Second, false, func(i int, extra []string) *Redis {
		return startRedisAt(t, cfg, t.TempDir(), ports[i], extra)
	})
}

// freePort is FreePort for a caller that is not a test.
func freePort() (int, error) {
	for range 1000 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		ok, err := reservePort(port)
		if err != nil {
			return 0, err
		}
		if ok {
			return port, nil
		}
	}
	return 0, fmt.Errorf("every port the kernel offered was handed out in the last %v", portHold)
}

// portHold is how long a port FreePort returned is not returned again, by
// this process or another test process on the machine: a server stopped by
// one test leaves peers that still dial its port (a cluster node's bus
// port above all), and a server of another test listening there would
// join their cluster.
const portHold = 15 * time.Minute

// reservePort records port as handed out, in a directory shared by the
// machine's test processes under an exclusive flock, unless it was handed
// out within portHold. It reports whether port is this caller's.
func reservePort(port int) (bool, error) {
	dir := filepath.Join(os.TempDir(), "fleetstore-testports")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, err
	}
	lock, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return false, err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return false, err
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) //nolint:errcheck // closed next
	name := filepath.Join(dir, strconv.Itoa(port))
	if fi, err := os.Stat(name); err == nil && time.Since(fi.ModTime()) < portHold {
		return false, nil
	}
	return true, os.WriteFile(name, nil, 0o644)
}
