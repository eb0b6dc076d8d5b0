package memcached

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"sync/atomic"

	"github.com/bradfitz/gomemcache/memcache"

	"github.com/fleetstore/fleetstore/driver"
)

// servers is the memcache.ServerSelector of one Conn. It resolves the URL's
// hosts on first use, with the call's context, rather than in Open as
// gomemcache's ServerList does (whose New drops a resolution error and
// leaves the client without servers for good). A failed resolution is
// retried by the next call; a successful one is kept.
type servers struct {
	hosts []string                   // "host:port", as in the URL
	addrs atomic.Pointer[[]net.Addr] // addr values; nil until resolved
	tls   *tls.Config                // memcacheds://: every connection is TLS; nil: plain TCP
}

var _ memcache.ServerSelector = (*servers)(nil)

// addr is a resolved server: a net.Addr whose String does not allocate
// (gomemcache calls it on every pool lookup). servers keeps them as
// net.Addr values, so that PickServer, called for every key of every
// command, does not box one each time.
type addr struct {
	s    string // "IP:PORT"
	host string // the host as in the URL: a TLS connection verifies the server under it
}

func (a addr) Network() string { return "tcp" }
func (a addr) String() string  { return a.s }

// resolve makes every host an IP address, once.
func (sv *servers) resolve(ctx context.Context) error {
	if sv.addrs.Load() != nil {
		return nil
	}
	out := make([]net.Addr, len(sv.hosts))
	for i, hp := range sv.hosts {
		host, port, _ := net.SplitHostPort(hp) // checked in Open
		ip, err := netip.ParseAddr(host)
		if err != nil {
			ips, lerr := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
			if lerr != nil {
				if ctx.Err() != nil {
					return fmt.Errorf("memcached: resolve %s: %w: %w", host, driver.ErrTimeout, lerr)
				}
				return fmt.Errorf("memcached: resolve %s: %w: %w", host, driver.ErrUnavailable, lerr)
			}
			if len(ips) == 0 {
				return fmt.Errorf("memcached: resolve %s: %w: no addresses", host, driver.ErrUnavailable)
			}
			ip = ips[0]
			for _, a := range ips { // prefer IPv4, as localhost usually means 127.0.0.1
				if a.Is4() || a.Is4In6() {
					ip = a.Unmap()
					break
				}
			}
		}
		p, _ := strconv.ParseUint(port, 10, 16)
		out[i] = addr{s: netip.AddrPortFrom(ip, uint16(p)).String(), host: host}
	}
	sv.addrs.Store(&out)
	return nil
}

// PickServer implements memcache.ServerSelector: the server of a key's
// tenant (see shard).
func (sv *servers) PickServer(key string) (net.Addr, error) {
	p := sv.addrs.Load()
	if p == nil {
		return nil, memcache.ErrNoServers
	}
	return (*p)[shard(key, len(*p))], nil
}

// Each implements memcache.ServerSelector.
func (sv *servers) Each(f func(net.Addr) error) error {
	p := sv.addrs.Load()
	if p == nil {
		return memcache.ErrNoServers
	}
	for _, a := range *p {
		if err := f(a); err != nil {
			return err
		}
	}
	return nil
}
