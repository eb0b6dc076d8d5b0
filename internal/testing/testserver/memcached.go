package testserver

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Memcached is a memcached server started for one test on a free loopback
// port, with UDP off. It is stopped when the test ends.
type Memcached struct {
	// Addr is "127.0.0.1:PORT", plain TCP (with TLS too: a notls
	// listener, for the tests' own commands).
	Addr string
	// TLSAddr is "127.0.0.1:PORT" of the TLS listener of
	// StartMemcachedTLS, else "".
	TLSAddr string

	t    testing.TB
	bin  string
	args []string
	tls  *Certs
	auth bool // ssl_verify_mode=2: a client certificate is required

	mu   sync.Mutex
	proc *Process // nil when stopped
}

// StartMemcached starts memcached (-l 127.0.0.1 -p PORT -U 0) with the
// extra command-line args, waits until it accepts connections and stops it
// at t.Cleanup. It skips t (fails it when CI is set) when memcached is not
// on PATH.
func StartMemcached(t testing.TB, args ...string) *Memcached {
	t.Helper()
	return startMemcached(t, &Memcached{t: t, bin: Need(t, "memcached"), args: args})
}

// StartMemcachedTLS is StartMemcached with TLS on (-Z): a TLS listener
// at TLSAddr serving c's server certificate, beside the plain listener at
// Addr. With requireClientCert (ssl_verify_mode=2) a client must present
// a certificate signed by c's CA; without it, none is asked for.
func StartMemcachedTLS(t testing.TB, c *Certs, requireClientCert bool, args ...string) *Memcached {
	t.Helper()
	return startMemcached(t, &Memcached{t: t, bin: Need(t, "memcached"), args: args, tls: c,
		auth: requireClientCert})
}

func startMemcached(t testing.TB, m *Memcached) *Memcached {
	t.Helper()
	var err error
	for range 3 { // the free port may be taken before memcached binds it
		m.Addr = "127.0.0.1:" + strconv.Itoa(FreePort(t))
		if m.tls != nil {
			m.TLSAddr = "127.0.0.1:" + strconv.Itoa(FreePort(t))
		}
		if err = m.start(); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("start memcached: %v", err)
	}
	t.Cleanup(m.Stop)
	return m
}

func (m *Memcached) start() error {
	port := m.Addr[strings.LastIndexByte(m.Addr, ':')+1:]
	args := []string{"-l", "127.0.0.1", "-p", port, "-U", "0"}
	if m.tls != nil {
		verify := "0"
		if m.auth {
			verify = "2"
		}
		args = []string{"-U", "0", "-Z", "-l", "notls:" + m.Addr, "-l", m.TLSAddr,
			"-o", "ssl_chain_cert=" + m.tls.ServerCertFile + ",ssl_key=" + m.tls.ServerKeyFile +
				",ssl_ca_cert=" + m.tls.CAFile + ",ssl_verify_mode=" + verify}
	}
	if os.Geteuid() == 0 {
		args = append(args, "-u", "root") // memcached refuses root without -u
	}
	cmd := exec.Command(m.bin, append(args, m.args...)...)
	cmd.Stdout = os.Stderr
	cmd.Stderr = os.Stderr
	p, err := StartProcess(cmd)
	if err != nil {
		return err
	}
	if err := mcWaitUp(m.Addr, p.Done()); err != nil {
		_ = p.Kill()
		return err
	}
	m.mu.Lock()
	m.proc = p
	m.mu.Unlock()
	return nil
}

// mcWaitUp waits until addr accepts connections or the process exits.
func mcWaitUp(addr string, exited <-chan struct{}) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case <-exited:
			return fmt.Errorf("memcached on %s exited at start", addr)
		default:
		}
		if err := WaitTCP(addr, 50*time.Millisecond); err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("memcached on %s not accepting connections after 10s", addr)
		}
	}
}

// Stop kills the server and waits for it to exit. Stopping twice is fine.
func (m *Memcached) Stop() {
	m.mu.Lock()
	p := m.proc
	m.proc = nil
	m.mu.Unlock()
	if p != nil {
		_ = p.Kill() // SIGKILL also ends a SIGSTOPped process
	}
}

// Restart stops the server and starts a new one on the same address: every
// item is lost, as after a real restart.
func (m *Memcached) Restart() error {
	m.Stop()
	var err error
	for range 50 { // the old socket may linger a moment
		if err = m.start(); err == nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("restart memcached on %s: %w", m.Addr, err)
}

// Pause stops the server process (SIGSTOP): it keeps accepting TCP
// connections in the kernel backlog but never answers, until Resume.
func (m *Memcached) Pause() error { return m.signal(syscall.SIGSTOP) }

// Resume continues a paused server (SIGCONT).
func (m *Memcached) Resume() error { return m.signal(syscall.SIGCONT) }

func (m *Memcached) signal(sig os.Signal) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.proc == nil {
		return errors.New("memcached not running")
	}
	return m.proc.Signal(sig)
}

// StatsConn is a connection of the test's own to a memcached, for its
// stats commands. Kept open, it is counted once among the server's
// connections.
type StatsConn struct {
	c net.Conn
	r *bufio.Reader
}

// DialStats connects to the memcached at addr; the connection is closed
// at t.Cleanup.
func DialStats(t testing.TB, addr string) *StatsConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("testserver: stats: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return &StatsConn{c: c, r: bufio.NewReader(c)}
}

// Stats sends `stats`, or `stats SUB` when sub is not "" (e.g. "slabs"),
// and returns its integer values by name. It fails t on an error or a
// line that is not STAT NAME VALUE.
func (s *StatsConn) Stats(t testing.TB, sub string) map[string]int64 {
	t.Helper()
	cmd := strings.TrimSpace("stats " + sub)
	_ = s.c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := s.c.Write([]byte(cmd + "\r\n")); err != nil {
		t.Fatalf("testserver: %s: %v", cmd, err)
	}
	out := make(map[string]int64)
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			t.Fatalf("testserver: %s: %v", cmd, err)
		}
		f := strings.Fields(line)
		if len(f) == 1 && f[0] == "END" {
			return out
		}
		if len(f) != 3 || f[0] != "STAT" {
			t.Fatalf("testserver: %s: %q", cmd, line)
		}
		if n, err := strconv.ParseInt(f[2], 10, 64); err == nil {
			out[f[1]] = n
		}
	}
}

// MemcachedStats is Stats on a connection of its own to addr.
func MemcachedStats(t testing.TB, addr, sub string) map[string]int64 {
	t.Helper()
	s := DialStats(t, addr)
	defer s.c.Close()
	return s.Stats(t, sub)
}
