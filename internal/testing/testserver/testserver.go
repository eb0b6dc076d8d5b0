// Package testserver starts real servers (redis-server, a Redis Cluster,
// memcached, a PostgreSQL cluster) for tests, on free loopback ports in temp dirs, and stops them
// when the test ends. A test that needs a binary it cannot find skips, or
// fails when the CI environment variable is set.
package testserver

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore/nettest"
)

// Need returns the path of binary, or skips t (fails it when CI is set)
// when it is not on PATH.
func Need(t testing.TB, binary string) string {
	t.Helper()
	path, err := exec.LookPath(binary)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s not found on PATH and CI is set: `make test` installs it", binary)
		}
		t.Skipf("%s not found on PATH: install it (make servers) to run this test", binary)
	}
	return path
}

// ValkeyBinary returns the server binary the Valkey driver's tests use:
// valkey-server. Without it on PATH, locally, it is redis-server (same
// protocol); when CI is set it is valkey-server all the same, so that Need
// fails the test: `make test` installs it (from bookworm-backports).
func ValkeyBinary() string {
	if _, err := exec.LookPath("valkey-server"); err == nil || os.Getenv("CI") != "" {
		return "valkey-server"
	}
	return "redis-server"
}

// FreePort returns a loopback TCP port that was free a moment ago (the
// port of a nettest.RefusedAddr) and that no FreePort on this machine
// returned in the last 15 minutes.
func FreePort(t testing.TB) int {
	t.Helper()
	for range 1000 {
		_, port, _ := net.SplitHostPort(nettest.RefusedAddr(t))
		n, err := strconv.Atoi(port)
		if err != nil {
			t.Fatalf("free port: %v", err)
		}
		ok, err := reservePort(n)
		if err != nil {
			t.Fatalf("free port: %v", err)
		}
		if ok {
			return n
		}
	}
	t.Fatalf("free port: every port the kernel offered was handed out in the last %v", portHold)
	return 0
}

// WaitTCP waits until addr accepts connections, for at most d.
func WaitTCP(addr string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not accepting connections after %v: %w", addr, d, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitFor calls ok every interval until it returns nil, for at most d;
// then it returns ok's last error.
// errFinal, wrapped in the error of waitFor's ok, ends the wait at once.
var errFinal = errors.New("will not change")

func waitFor(d, interval time.Duration, ok func() error) error {
	deadline := time.Now().Add(d)
	for {
		err := ok()
		if err == nil || errors.Is(err, errFinal) {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %v: %w", d, err)
		}
		time.Sleep(interval)
	}
}
