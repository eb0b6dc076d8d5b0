package testserver

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Postgres is a PostgreSQL cluster started for one test: initdb in a temp
// dir, the postgres server on a free loopback port, trust authentication
// for the user "fleet" on loopback. It is stopped, and its dir removed,
// when the test ends.
type Postgres struct {
	// Addr is "127.0.0.1:PORT".
	Addr string
	// Dir is the cluster's data directory.
	Dir string

	bin      string // the directory of initdb and postgres
	top      string // the temp dir: Dir, the socket, the log
	deathSig bool   // the server is killed when its starter's thread exits
	cred     *syscall.Credential
	settings []string // -c settings

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has been waited for
}

// ErrNoPostgres is returned (wrapped) by LaunchPostgres when PostgreSQL
// is not installed, or when the process runs as root and there is no
// user postgres to run the server as.
var ErrNoPostgres = errors.New("postgresql not installed")

// PostgresBinDir returns the directory of PostgreSQL's server binaries
// (initdb, postgres): the newest /usr/lib/postgresql/N/bin (Debian's
// layout, which keeps them off PATH), else the directory of initdb on PATH.
// It skips t (fails it when CI is set) when there is none.
func PostgresBinDir(t testing.TB) string {
	t.Helper()
	if d, err := postgresBinDir(); err == nil {
		return d
	}
	return filepath.Dir(Need(t, "initdb"))
}

// postgresBinDir is PostgresBinDir's search; its error wraps ErrNoPostgres.
func postgresBinDir() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return pgMajor(dirs[i]) > pgMajor(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "postgres")); err == nil {
			return d, nil
		}
	}
	path, err := exec.LookPath("initdb")
	if err != nil {
		return "", fmt.Errorf("%w: no /usr/lib/postgresql/*/bin/postgres and no initdb on PATH", ErrNoPostgres)
	}
	return filepath.Dir(path), nil
}

func pgMajor(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

// StartPostgres creates a cluster with initdb in a temp dir and starts
// postgres on a free loopback port, with the extra server settings
// ("name=value", each passed as -c). The server runs as the user
// "postgres" when the test runs as root (postgres refuses root). It skips
// t (fails it when CI is set) when PostgreSQL is not installed.
func StartPostgres(t testing.TB, settings ...string) *Postgres {
	t.Helper()
	return startPostgres(t, nil, settings)
}

// StartPostgresTLS is StartPostgres with TLS on (ssl=on), serving c's
// server certificate; plain connections are accepted too.
func StartPostgresTLS(t testing.TB, c *Certs, settings ...string) *Postgres {
	t.Helper()
	return startPostgres(t, c, settings)
}

func startPostgres(t testing.TB, certs *Certs, settings []string) *Postgres {
	t.Helper()
	PostgresBinDir(t) // skips t when PostgreSQL is not installed
	p, err := LaunchPostgres(PostgresConfig{Certs: certs, Settings: settings})
	if errors.Is(err, ErrNoPostgres) {
		if os.Getenv("CI") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// PostgresConfig is how LaunchPostgres starts a cluster.
type PostgresConfig struct {
	// Certs, when not nil, turns TLS on (ssl=on) with its server
	// certificate; plain connections are accepted too.
	Certs *Certs
	// Settings are extra server settings, "name=value", each passed as -c.
	Settings []string
	// DieWithParent kills the server (SIGKILL) when the thread that
	// started it exits, so that a killed command leaves no server behind.
	DieWithParent bool
}

// LaunchPostgres is StartPostgres for a caller that is not a test (make
// compare): the caller stops the server and removes its dir with Close.
// Its error wraps ErrNoPostgres when PostgreSQL is not installed.
func LaunchPostgres(cfg PostgresConfig) (_ *Postgres, err error) {
	bin, err := postgresBinDir()
	if err != nil {
		return nil, err
	}
	p := &Postgres{bin: bin, deathSig: cfg.DieWithParent}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("%w: running as root with no user postgres to run the server as: %v",
				ErrNoPostgres, err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		p.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	// Not t.TempDir: its parents are root's alone (0700), which the
	// postgres user cannot enter.
	dir, err := os.MkdirTemp("", "fleetstore-pg-")
	if err != nil {
		return nil, err
	}
	p.top = dir
	defer func() {
		if err != nil {
			_ = os.RemoveAll(dir)
		}
	}()
	p.Dir = filepath.Join(dir, "data")
	if p.cred != nil {
		if err := os.Chown(dir, int(p.cred.Uid), int(p.cred.Gid)); err != nil {
			return nil, err
		}
	}
	initdb := exec.Command(filepath.Join(p.bin, "initdb"), "-D", p.Dir, "-U", "fleet",
		"--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	base := []string{"listen_addresses=127.0.0.1", "unix_socket_directories=" + dir,
		"fsync=off", "full_page_writes=off", "max_connections=300", "log_min_messages=fatal"}
	if certs := cfg.Certs; certs != nil {
		// The server reads them as its own user, the key private to it.
		for _, f := range []struct{ from, to string }{{certs.ServerCertFile, "server.crt"},
			{certs.ServerKeyFile, "server.key"}} {
			b, err := os.ReadFile(f.from)
			if err != nil {
				return nil, err
			}
			to := filepath.Join(dir, f.to)
			if err := os.WriteFile(to, b, 0o600); err != nil {
				return nil, err
			}
			if p.cred != nil {
				if err := os.Chown(to, int(p.cred.Uid), int(p.cred.Gid)); err != nil {
					return nil, err
				}
			}
		}
		base = append(base, "ssl=on", "ssl_cert_file="+filepath.Join(dir, "server.crt"),
			"ssl_key_file="+filepath.Join(dir, "server.key"))
	}
	for range 3 { // the free port may be taken before postgres binds it
		port, perr := freePort()
		if perr != nil {
			return nil, fmt.Errorf("free port: %w", perr)
		}
		p.Addr = "127.0.0.1:" + strconv.Itoa(port)
		p.settings = append(base, cfg.Settings...)
		if err = p.start(); err == nil {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	return p, nil
}

// Close stops the server (Stop) and removes its temp dir.
func (p *Postgres) Close() error {
	err := p.Stop()
	if rerr := os.RemoveAll(p.top); err == nil {
		err = rerr
	}
	return err
}

// BinDir is the directory of the server's binaries (initdb, postgres,
// pgbench when installed).
func (p *Postgres) BinDir() string { return p.bin }

// Processes returns the pids of the server and of its backends and
// workers, the server first; none when it is not running.
func (p *Postgres) Processes() []int {
	p.mu.Lock()
	cmd := p.cmd
	p.mu.Unlock()
	if cmd == nil {
		return nil
	}
	return append([]int{cmd.Process.Pid}, pgChildren(cmd.Process.Pid)...)
}

// URL returns "postgres://fleet@ADDR/postgres?sslmode=disable".
func (p *Postgres) URL() string {
	return "postgres://fleet@" + p.Addr + "/postgres?sslmode=disable"
}

func (p *Postgres) start() error {
	_, port, _ := splitPort(p.Addr)
	args := []string{"-D", p.Dir, "-p", port}
	for _, s := range p.settings {
		args = append(args, "-c", s)
	}
	cmd := exec.Command(filepath.Join(p.bin, "postgres"), args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred, Setpgid: true}
	if p.deathSig {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	logf, err := os.Create(filepath.Join(filepath.Dir(p.Dir), "postgres.log"))
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(done) }()
	p.mu.Lock()
	p.cmd, p.done = cmd, done
	p.mu.Unlock()
	if err := waitPostgres(filepath.Join(p.bin, "pg_isready"), p.Addr, done, 30*time.Second); err != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		log, _ := os.ReadFile(filepath.Join(filepath.Dir(p.Dir), "postgres.log"))
		return fmt.Errorf("%w\n%s", err, log)
	}
	return nil
}

// waitPostgres waits until addr accepts sessions (pg_isready), or the
// server exits.
func waitPostgres(isready, addr string, done <-chan struct{}, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		select {
		case <-done:
			return errors.New("postgres exited")
		default:
		}
		if err := WaitTCP(addr, 50*time.Millisecond); err == nil {
			host, port, _ := splitPort(addr)
			// Accepting connections is not accepting sessions: the
			// startup refuses them (57P03) until recovery is done.
			if exec.Command(isready, "-q", "-h", host, "-p", port, "-U", "fleet", "-d", "postgres").Run() == nil {
				return nil
			}
			time.Sleep(20 * time.Millisecond)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres not accepting connections on %s after %v", addr, d)
		}
	}
}

func splitPort(addr string) (string, string, error) {
	for i := len(addr) - 1; i >= 0; i-- {
		if addr[i] == ':' {
			return addr[:i], addr[i+1:], nil
		}
	}
	return "", "", errors.New("no port")
}

// Stop shuts the server down (fast shutdown: SIGINT, its sessions ended
// with FATAL 57P01) and waits for it and its backends; after 10s it kills
// them. Stopping a stopped server is nil.
func (p *Postgres) Stop() error {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.cmd = nil
	p.mu.Unlock()
	if cmd == nil {
		return nil
	}
	_ = cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
	return nil
}

// Restart stops the server and starts it again on the same port and data.
func (p *Postgres) Restart() error {
	if err := p.Stop(); err != nil {
		return err
	}
	return p.start()
}

// Kill ends the server and every backend with SIGKILL, as a crash (or the
// OOM killer on every process) would;
// Restart starts it again (after crash recovery).
func (p *Postgres) Kill() error {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.cmd = nil
	p.mu.Unlock()
	if cmd == nil {
		return errors.New("testserver: kill: postgres not running")
	}
	for _, pid := range append(pgChildren(cmd.Process.Pid), cmd.Process.Pid) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	<-done
	return nil
}

// pgChildren returns the processes whose parent is pid: the server's
// backends and workers, each of which PostgreSQL moves to a session of its
// own (setsid), out of the server's process group.
func pgChildren(pid int) []int {
	dirs, _ := os.ReadDir("/proc")
	var out []int
	for _, d := range dirs {
		n, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid …: comm may hold spaces; ppid follows the last ')'.
		i := strings.LastIndexByte(string(stat), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, n)
		}
	}
	return out
}

// Freeze stops the server and its backends with SIGSTOP; Thaw resumes them.
func (p *Postgres) Freeze() error { return p.signalGroup(syscall.SIGSTOP) }

// Thaw resumes a server stopped by Freeze.
func (p *Postgres) Thaw() error { return p.signalGroup(syscall.SIGCONT) }

func (p *Postgres) signalGroup(sig syscall.Signal) error {
	p.mu.Lock()
	cmd := p.cmd
	p.mu.Unlock()
	if cmd == nil {
		return errors.New("testserver: signal: postgres not running")
	}
	// The backends first on SIGSTOP (none forked meanwhile answers), last
	// on SIGCONT.
	pids := append(pgChildren(cmd.Process.Pid), cmd.Process.Pid)
	if sig == syscall.SIGCONT {
		pids = append([]int{cmd.Process.Pid}, pids[:len(pids)-1]...)
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, sig); err != nil && pid == cmd.Process.Pid {
			return err
		}
	}
	return nil
}
