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
	"syscall"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/fleetstore/fleetstore/internal/testing/testserver"
)

// server is a redis-server this command started on a free loopback port,
// in a temp dir, without persistence.
type server struct {
	addr string
	dir  string
	proc *testserver.Process // nil when stopped
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
		s := &server{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dir: dir}
		if last = s.start(ctx, path, port, extra); last == nil {
			return s, nil
		}
	}
	_ = os.RemoveAll(dir)
	return nil, fmt.Errorf("start %s: %w", bin, last)
}

func (s *server) start(ctx context.Context, bin string, port int, extra []string) error {
	conf := filepath.Join(s.dir, "redis.conf")
	if err := testserver.WriteConf(conf, append(testserver.RedisConf(port, s.dir), extra...)); err != nil {
		return err
	}
	cmd := exec.Command(bin, conf)
	cmd.Dir = s.dir
	// The server dies with compare, even when compare is killed with
	// SIGKILL and cannot stop it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p, err := testserver.StartProcess(cmd)
	if err != nil {
		return err
	}
	probe := goredis.NewClient(&goredis.Options{Addr: s.addr, MaxRetries: -1,
		DialTimeout: time.Second})
	defer probe.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := probe.Ping(ctx).Err()
		if err == nil {
			s.proc = p
			return nil
		}
		select {
		case <-p.Done():
			return fmt.Errorf("exited before answering: %s", testserver.LogTail(s.dir))
		case <-ctx.Done():
			p.Stop()
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.Stop()
			return fmt.Errorf("no answer on %s after 10s: %v", s.addr, err)
		}
	}
}

// close stops the server (testserver.Process.Stop) and removes its temp
// dir.
func (s *server) close() {
	if s.proc != nil {
		s.proc.Stop()
	}
	_ = os.RemoveAll(s.dir)
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
