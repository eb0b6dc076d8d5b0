package faults

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/fleetstore/fleetstore/internal/testing/testserver"
)

// A target is one network driver and the kind of server it runs against.
type target struct {
	name  string // the driver: redis, valkey, memcached
	start func(t *testing.T) server
	// url is the driver's URL for addr with the query params (a=1&b=2).
	url func(addr, params string) string
	// poolParam is the URL parameter that sizes the driver's connection
	// pool ("" when it has none: valkey shares one connection per server).
	poolParam string
	// busyConns is the most connections to one server the driver may hold
	// while callers calls are in flight with the pool sized pool; idleConns
	// the most it keeps once they have returned.
	busyConns func(callers, pool int) int
	idleConns func(pool int) int
}

// server is a running server the tests abuse.
type server interface {
	Addr() string
	Kill() error                 // SIGKILL, and wait for the exit
	Restart() error              // start again on the same port; return once it answers
	Pause(d time.Duration) error // stop answering for d (from now), then answer again
	Freeze() error               // SIGSTOP: a black hole (connections accepted, nothing answered)
	Thaw() error                 // SIGCONT after Freeze
	Conns() (int, error)         // client connections the server counts, the asking one included
}

var targets = []target{
	{
		name:  "redis",
		start: func(t *testing.T) server { return startRedis(t, "redis-server") },
		url: func(addr, params string) string {
			return "redis://" + addr + "/0?" + params
		},
		// go-redis: pool_size caps the connections per server; a caller
		// waits for one up to pool_timeout (= the budget).
		poolParam: "pool_size",
		busyConns: func(_, pool int) int { return pool },
		idleConns: func(pool int) int { return pool },
	},
	{
		name:  "valkey",
		start: func(t *testing.T) server { return startRedis(t, testserver.ValkeyBinary()) },
		url: func(addr, params string) string {
			return "valkey://" + addr + "?" + params
		},
		// valkey-go with the driver's settings: one auto-pipelined
		// connection per server, whatever the concurrency.
		busyConns: func(int, int) int { return 1 },
		idleConns: func(int) int { return 1 },
	},
	{
		name:  "memcached",
		start: func(t *testing.T) server { return startMemcached(t) },
		url: func(addr, params string) string {
			return "memcached://" + addr + "?" + params
		},
		// max_conns caps the sessions (one socket per server each) a
		// Store keeps open, in use or idle; a caller waits for one up to
		// its budget. max_idle_conns defaults to at most max_conns.
		poolParam: "max_conns",
		busyConns: func(_, pool int) int { return pool },
		idleConns: func(pool int) int { return pool },
	},
}

// forEach runs f as a subtest per target, one after the other: the tests
// time calls and must not share the machine with each other.
func forEach(t *testing.T, f func(t *testing.T, tg target)) {
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) { f(t, tg) })
	}
}

// redisServer is a redis-server (or valkey-server) with a plain go-redis
// client of one connection for CLIENT PAUSE and INFO, apart from the
// Store under test.
type redisServer struct {
	*testserver.Redis
	admin *goredis.Client
}

func startRedis(t *testing.T, bin string, opts ...testserver.RedisOption) *redisServer {
	r := testserver.StartRedis(t, append([]testserver.RedisOption{testserver.Binary(bin)}, opts...)...)
	t.Logf("server: %s on %s", bin, r.Addr)
	admin := goredis.NewClient(&goredis.Options{Addr: r.Addr, PoolSize: 1, MaxIdleConns: 1})
	t.Cleanup(func() { admin.Close() })
	return &redisServer{Redis: r, admin: admin}
}

func (s *redisServer) Addr() string { return s.Redis.Addr }

func (s *redisServer) Pause(d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return s.admin.Do(ctx, "CLIENT", "PAUSE", strconv.FormatInt(d.Milliseconds(), 10), "ALL").Err()
}

func (s *redisServer) Conns() (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	info, err := s.admin.Info(ctx, "clients").Result()
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(testserver.InfoField(info, "connected_clients"))
}

// mcServer is a memcached with one connection of its own for `stats`.
type mcServer struct {
	*testserver.Memcached

	mu    sync.Mutex
	stats net.Conn // nil until first used, and after an error
	r     *bufio.Reader
}

func startMemcached(t *testing.T) *mcServer {
	m := testserver.StartMemcached(t)
	t.Logf("server: memcached on %s", m.Addr)
	s := &mcServer{Memcached: m}
	t.Cleanup(func() {
		s.mu.Lock()
		if s.stats != nil {
			s.stats.Close()
		}
		s.mu.Unlock()
	})
	return s
}

func (s *mcServer) Addr() string { return s.Memcached.Addr }

// Kill is Stop, which is a SIGKILL.
func (s *mcServer) Kill() error {
	s.Stop()
	return nil
}

// Freeze is SIGSTOP (memcached's Pause), Thaw SIGCONT.
func (s *mcServer) Freeze() error { return s.Memcached.Pause() }
func (s *mcServer) Thaw() error   { return s.Memcached.Resume() }

// Pause sends SIGSTOP now and SIGCONT after d.
func (s *mcServer) Pause(d time.Duration) error {
	if err := s.Memcached.Pause(); err != nil {
		return err
	}
	time.AfterFunc(d, func() { s.Resume() })
	return nil
}

// Conns is `stats` curr_connections.
func (s *mcServer) Conns() (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stats == nil {
		c, err := net.DialTimeout("tcp", s.Memcached.Addr, 2*time.Second)
		if err != nil {
			return 0, err
		}
		s.stats, s.r = c, bufio.NewReader(c)
	}
	n, err := s.currConnections()
	if err != nil {
		s.stats.Close()
		s.stats = nil
	}
	return n, err
}

func (s *mcServer) currConnections() (int, error) {
	_ = s.stats.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := s.stats.Write([]byte("stats\r\n")); err != nil {
		return 0, err
	}
	n := -1
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			return 0, err
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "END" {
			break
		}
		if v, ok := strings.CutPrefix(line, "STAT curr_connections "); ok {
			if n, err = strconv.Atoi(v); err != nil {
				return 0, err
			}
		}
	}
	if n < 0 {
		return 0, fmt.Errorf("stats: no curr_connections")
	}
	return n, nil
}

// openSockets counts the sockets this process holds open (socket file
// descriptors in /proc/self/fd): while a test runs, its Store's
// connections, dials in progress included, and the test's own counting
// connection. Unlike the server's count it drops the moment the driver
// closes a socket, whatever the server has read yet.
func openSockets() (int, error) {
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return 0, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, name := range names {
		if link, err := os.Readlink("/proc/self/fd/" + name); err == nil && strings.HasPrefix(link, "socket:") {
			n++
		}
	}
	return n, nil
}
