package memcached

import (
	"context"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/driver"
)

func init() {
	fleetstore.Register("memcached", Driver{})
	fleetstore.Register("memcacheds", Driver{})
}

// DefaultPort is the port of a host given without one.
const DefaultPort = "11211"

// DefaultMaxIdleConns is the default of the max_idle_conns parameter.
const DefaultMaxIdleConns = 64

// DefaultMaxConns is the default of the max_conns parameter, when
// max_idle_conns is not set higher.
const DefaultMaxConns = 64

// Driver is the memcached driver, registered as "memcached" and
// "memcacheds" (TLS).
type Driver struct{}

var (
	_ driver.Driver            = Driver{}
	_ driver.ExpiryGranularity = Driver{}
)

// ExpiryGranularity implements driver.ExpiryGranularity: an item may
// linger up to 2s past its expiry. Memcached's clock ticks in whole
// seconds and every exptime is rounded up, plus 1s (the package doc's
// Time section).
func (Driver) ExpiryGranularity() time.Duration { return 2 * time.Second }

// Open implements driver.Driver. It parses the URL, whose form and
// parameters (timeout, key_prefix, max_conns, max_idle_conns, and for
// memcacheds skip_verify and the TLS files) the package doc's URL section
// lists, and reads the TLS files it names; it does no network I/O.
func (Driver) Open(cfg driver.Config) (driver.Conn, error) {
	u := cfg.URL
	q := u.Query()
	params := append([]string{"max_conns", "max_idle_conns"}, tlsParams...)
	if err := driver.CheckParams(q, params...); err != nil {
		return nil, err
	}
	if u.User != nil {
		return nil, driver.Invalid("url: user", "memcached URLs take no user or password")
	}
	if u.Opaque != "" || (u.Path != "" && u.Path != "/") {
		return nil, driver.Invalid("url: path",
			"memcached URLs have no path: want "+u.Scheme+"://host:port[,host:port...]")
	}
	hosts, err := parseHosts(u.Host)
	if err != nil {
		return nil, err
	}
	maxIdle, err := positiveParam(q, "max_idle_conns", DefaultMaxIdleConns)
	if err != nil {
		return nil, err
	}
	maxConns, err := positiveParam(q, "max_conns", max(DefaultMaxConns, maxIdle))
	if err != nil {
		return nil, err
	}
	tc, err := tlsConfig(u.Scheme, q)
	if err != nil {
		return nil, err
	}
	sv := &servers{hosts: hosts, tls: tc}
	c := &conn{
		keys:    keys{prefix: cfg.KeyPrefix},
		sv:      sv,
		pool:    newPool(sv, cfg.Timeout, maxConns, maxIdle),
		now:     wallMicros,
		log:     cfg.Logger,
		turns:   newStripes(),
		timeout: cfg.Timeout,
		seen:    make(map[string]bool),
	}
	c.bg, c.stopBG = context.WithCancel(context.Background())
	return c, nil
}

// positiveParam is the positive integer parameter name of q (the last
// one given), or def when absent.
func positiveParam(q url.Values, name string, def int) (int, error) {
	vs, ok := q[name]
	if !ok {
		return def, nil
	}
	n, err := strconv.Atoi(vs[len(vs)-1])
	if err != nil || n < 1 {
		return 0, driver.Invalid("url: "+name,
			"want a positive integer, got "+strconv.Quote(vs[len(vs)-1]))
	}
	return n, nil
}

// parseHosts splits "h1:p1,h2,[::1]:p3" into "host:port" strings.
func parseHosts(list string) ([]string, error) {
	if list == "" {
		return nil, driver.Invalid("url: host", "want memcached://host:port[,host:port...]")
	}
	var hosts []string
	for _, hp := range strings.Split(list, ",") {
		host, port, err := net.SplitHostPort(hp)
		if err != nil {
			host, port = strings.TrimSuffix(strings.TrimPrefix(hp, "["), "]"), DefaultPort
		}
		if p, err := strconv.ParseUint(port, 10, 16); err != nil || p == 0 {
			return nil, driver.Invalid("url: host", "bad port in "+strconv.Quote(hp))
		}
		if host == "" || strings.ContainsAny(host, "[]/ ") {
			return nil, driver.Invalid("url: host", "bad host "+strconv.Quote(hp))
		}
		hosts = append(hosts, net.JoinHostPort(host, port))
	}
	return hosts, nil
}
