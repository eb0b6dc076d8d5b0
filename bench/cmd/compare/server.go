package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// server is a redis-server this command started on a free loopback port,
// in a temp dir, without persistence.
type server struct {
	addr string
	dir  string
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
}

// startServer starts bin, with extra lines of configuration, and waits
// until it answers PING. The free port may be taken by the time the
// server binds it: three tries.
func startServer(ctx context.Context, bin string, extra ...string) (*server, error) {
	path, err := exec.LookPath(bin)
	if err != nil {
		return nil, fmt.Errorf("%s not found (make servers installs it, or pass -addr): %w", bin, err)
	}
	dir, err := os.MkdirTemp("", "fleetstore-compare-")
	if err != nil {
		return nil, err
	}
	var last error
	for range 3 {
		port, err := freePort()
		if err != nil {
			last = err
			continue
		}
		s := &server{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dir: dir,
			done: make(chan struct{})}
		if last = s.start(ctx, path, port, extra); last == nil {
			return s, nil
		}
	}
	_ = os.RemoveAll(dir)
	return nil, fmt.Errorf("start %s: %w", bin, last)
}

func (s *server) start(ctx context.Context, bin string, port int, extra []string) error {
	conf := filepath.Join(s.dir, "redis.conf")
	lines := []string{
		"port " + strconv.Itoa(port),
		"bind 127.0.0.1",
		"dir " + s.dir,
		`save ""`,
		"appendonly no",
		"daemonize no",
		"logfile " + filepath.Join(s.dir, "server.log"),
	}
	lines = append(lines, extra...)
	if err := os.WriteFile(conf, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		return err
	}
	s.cmd = exec.Command(bin, conf)
	s.cmd.Dir = s.dir
	// The server dies with compare, even when compare is killed with
	// SIGKILL and cannot stop it.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		return err
	}
	go func() {
		_ = s.cmd.Wait()
		close(s.done)
	}()
	probe := goredis.NewClient(&goredis.Options{Addr: s.addr, MaxRetries: -1,
		DialTimeout: time.Second})
	defer probe.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := probe.Ping(ctx).Err()
		if err == nil {
			return nil
		}
		select {
		case <-s.done:
			return fmt.Errorf("exited before answering: %s", s.logTail())
		case <-ctx.Done():
			s.stop()
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.stop()
			return fmt.Errorf("no answer on %s after 10s: %v", s.addr, err)
		}
	}
}

// stop sends SIGINT (a redis-server shuts down on it), then SIGKILL after
// 5s, and waits for the exit; close also removes the temp dir.
func (s *server) stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(os.Interrupt)
		select {
		case <-s.done:
		case <-time.After(5 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.done
		}
	}
}

func (s *server) close() {
	s.stop()
	_ = os.RemoveAll(s.dir)
}

func (s *server) logTail() string {
	b, err := os.ReadFile(filepath.Join(s.dir, "server.log"))
	if err != nil {
		return "(no log)"
	}
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	a, ok := l.Addr().(*net.TCPAddr)
	if !ok {
		return 0, errors.New("listener has no TCP address")
	}
	return a.Port, nil
}
