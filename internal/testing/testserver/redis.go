package testserver

import (
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Redis is a redis-server (or valkey-server) started for a test on a free
// loopback port, in a temp dir, without persistence. It is stopped when
// the test ends.
type Redis struct {
	Addr     string // "127.0.0.1:PORT", plain TCP (also with TLS: for the tests' own commands)
	Port     int
	Password string // the requirepass given with Password, or ""
	TLSAddr  string // "127.0.0.1:PORT" of the TLS port given with TLS, or ""

	t    testing.TB
	bin  string
	dir  string
	conf string

	mu   sync.Mutex
	proc *Process // nil when stopped
}

// RedisOption configures StartRedis and StartCluster.
type RedisOption func(*redisConfig)

type redisConfig struct {
	bin      string
	password string
	lines    []string
	tls      *Certs
	authTLS  bool // tls-auth-clients yes
}

// Binary selects the server binary, e.g. "valkey-server" for the Valkey
// driver's tests. Default "redis-server". The test skips (fails under CI)
// when it is not on PATH.
func Binary(name string) RedisOption {
	return func(c *redisConfig) { c.bin = name }
}

// Password sets requirepass (and masterauth, for a cluster).
func Password(p string) RedisOption {
	return func(c *redisConfig) { c.password = p }
}

// ConfigLines adds redis.conf directives, e.g. "maxmemory-policy allkeys-lru".
func ConfigLines(lines ...string) RedisOption {
	return func(c *redisConfig) { c.lines = append(c.lines, lines...) }
}

// TLS adds a TLS port (tls-port) beside the plain one, serving c's server
// certificate. With requireClientCert, tls-auth-clients is yes: a client
// must present a certificate signed by c's CA; without it, no.
func TLS(c *Certs, requireClientCert bool) RedisOption {
	return func(cfg *redisConfig) { cfg.tls, cfg.authTLS = c, requireClientCert }
}

func newRedisConfig(opts []RedisOption) redisConfig {
	c := redisConfig{bin: "redis-server"}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// StartRedis starts a server and waits until it answers PING. It is
// stopped at t.Cleanup.
func StartRedis(t testing.TB, opts ...RedisOption) *Redis {
	t.Helper()
	c := newRedisConfig(opts)
	return startRedis(t, c, t.TempDir(), nil)
}

func startRedis(t testing.TB, c redisConfig, dir string, extra []string) *Redis {
	t.Helper()
	var last error
	for range 3 { // the free port may be taken by the time the server binds it
		r, err := tryStartRedis(t, c, dir, FreePort(t), extra)
		if err == nil {
			return r
		}
		last = err
	}
	t.Fatalf("testserver: %s: %v", c.bin, last)
	return nil
}

// tryStartRedis writes the config of a server on port and starts it; it
// is stopped at t.Cleanup.
func tryStartRedis(t testing.TB, c redisConfig, dir string, port int,
	extra []string) (*Redis, error) {
	t.Helper()
	bin := Need(t, c.bin)
	r := &Redis{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Port: port,
		Password: c.password, t: t, bin: bin, dir: dir, conf: filepath.Join(dir, "redis.conf")}
	lines := RedisConf(port, dir)
	if c.password != "" {
		lines = append(lines, "requirepass "+c.password, "masterauth "+c.password)
	}
	if c.tls != nil {
		lines = append(lines, r.tlsLines(c)...)
	}
	lines = append(lines, extra...)
	lines = append(lines, c.lines...)
	if err := WriteConf(r.conf, lines); err != nil {
		t.Fatalf("testserver: %v", err)
	}
	if err := r.start(); err != nil {
		return nil, err
	}
	t.Cleanup(r.Stop)
	return r, nil
}

// tlsLines picks r's TLS port (TLSAddr) and returns the directives of
// the TLS option: the port, the server certificate (also the one r
// presents as a client, to a master or another Sentinel), the CA,
// tls-auth-clients.
func (r *Redis) tlsLines(c redisConfig) []string {
	tlsPort := FreePort(r.t)
	r.TLSAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(tlsPort))
	auth := "no"
	if c.authTLS {
		auth = "yes"
	}
	return []string{
		"tls-port " + strconv.Itoa(tlsPort),
		"tls-cert-file " + c.tls.ServerCertFile,
		"tls-key-file " + c.tls.ServerKeyFile,
		"tls-ca-cert-file " + c.tls.CAFile,
		"tls-auth-clients " + auth,
	}
}

func (r *Redis) start() error {
	cmd := exec.Command(r.bin, r.conf)
	cmd.Dir = r.dir
	p, err := StartProcess(cmd)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := Do(r.Addr, r.Password, "PING"); err == nil {
			break
		}
		select {
		case <-p.Done():
			return fmt.Errorf("exited before answering (%v): %s", p.Err(), LogTail(r.dir))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.Stop()
			return fmt.Errorf("no answer on %s after 10s: %s", r.Addr, LogTail(r.dir))
		}
	}
	r.mu.Lock()
	r.proc = p
	r.mu.Unlock()
	return nil
}

// Stop stops the server and waits for it to exit. Stopping a stopped
// server does nothing.
func (r *Redis) Stop() {
	r.mu.Lock()
	p := r.proc
	r.proc = nil
	r.mu.Unlock()
	if p != nil {
		p.Stop()
	}
}

// Restart stops the server and starts it again on the same port, with the
// same configuration. Without persistence its data is gone; a cluster node
// keeps its slots (nodes.conf).
func (r *Redis) Restart() error {
	r.Stop()
	var err error
	for range 50 { // the port may linger briefly after the old process exits
		if err = r.start(); err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return err
}

// Do sends one command to the server (AUTH first when it has a password).
func (r *Redis) Do(args ...string) (any, error) {
	return Do(r.Addr, r.Password, args...)
}

// FlushScripts empties the server's script cache and removes its function
// libraries (SCRIPT FLUSH, FUNCTION FLUSH), as a restart without
// persistence does.
func (r *Redis) FlushScripts() error {
	if _, err := r.Do("SCRIPT", "FLUSH"); err != nil {
		return err
	}
	_, err := r.Do("FUNCTION", "FLUSH")
	return err
}

// WaitLibrary waits up to d until each of nodes holds the function library
// name (FUNCTION LIST).
func WaitLibrary(name string, d time.Duration, nodes ...*Redis) error {
	deadline := time.Now().Add(d)
	for _, n := range nodes {
		for {
			v, err := n.Do("FUNCTION", "LIST", "LIBRARYNAME", name)
			if a, ok := v.([]any); err == nil && ok && len(a) == 1 {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s: no library %s after %v (%v)", n.Addr, name, d, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return nil
}

// Info returns INFO section's text.
func (r *Redis) Info(section string) (string, error) {
	v, err := r.Do("INFO", section)
	if err != nil {
		return "", err
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("INFO: unexpected reply %T", v)
	}
	return s, nil
}

// URL returns "redis://[:PASSWORD@]ADDR" (scheme redis).
func (r *Redis) URL() string {
	if r.Password != "" {
		return "redis://:" + r.Password + "@" + r.Addr
	}
	return "redis://" + r.Addr
}
