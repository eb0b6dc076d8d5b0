package memcached

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"time"

	"go.uber.org/zap"
)

// answered starts, after a call that the servers answered, the check of
// every server's settings in the background, once; a check that could not
// reach a server runs again after a later call.
func (c *conn) answered() {
	if !c.checked.Load() && c.checking.CompareAndSwap(false, true) {
		c.wg.Add(1)
		go c.checkSettings()
	}
}

// warnEviction is the warning of a server that evicts items.
const warnEviction = "fleetstore: memcached evicts items when its memory is full: an evicted bucket " +
	"item forgets its tenant's rate limits and quota counts, an evicted claim lets a duplicate " +
	"through; run memcached with -M (and -m sized for the items)"

// checkSettings reads `stats settings` of every server, off the hot path,
// and warns once per server whose evictions are on (memcached's default;
// -M turns them off): when its memory is full it drops items, least
// recently used first, to store new ones (package doc, Failure cases). A
// server that refuses the command (a proxy) is not checked.
func (c *conn) checkSettings() {
	defer c.wg.Done()
	defer c.checking.Store(false)
	p := c.sv.addrs.Load()
	if p == nil {
		return
	}
	ctx, cancel := context.WithTimeout(c.bg, max(c.timeout, time.Second))
	defer cancel()
	all := true
	for _, a := range *p {
		if c.seen[a.String()] {
			continue
		}
		st, err := c.settings(ctx, a)
		switch {
		case errors.Is(err, errRefused):
			c.log.Debug("memcached: the server refuses stats settings", zap.String("server", a.String()))
		case err != nil:
			all = false
			continue
		case st["evictions"] == "on":
			c.log.Warn(warnEviction, zap.String("server", a.String()))
		default:
			c.log.Debug("memcached: the server does not evict", zap.String("server", a.String()))
		}
		c.seen[a.String()] = true
	}
	c.checked.Store(all)
}

// errRefused is a server's ERROR answer to stats settings.
var errRefused = errors.New("stats settings refused")

// settings returns the `stats settings` of the server at a, on a
// connection of its own, which takes a slot of max_conns while it lasts.
func (c *conn) settings(ctx context.Context, a net.Addr) (map[string]string, error) {
	done, err := c.pool.slot(ctx) // within max_conns
	if err != nil {
		return nil, err
	}
	defer done()
	nc, err := c.sv.dial(ctx, &net.Dialer{}, "tcp", a.String())
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	if dl, ok := ctx.Deadline(); ok {
		nc.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { nc.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if _, err := io.WriteString(nc, "stats settings\r\n"); err != nil {
		return nil, err
	}
	r := bufio.NewReaderSize(nc, 1024)
	out := make(map[string]string)
	for range 1000 {
		line, err := r.ReadSlice('\n')
		if err != nil {
			return nil, err
		}
		line = bytes.TrimRight(line, "\r\n")
		if string(line) == "END" {
			return out, nil
		}
		f := bytes.Fields(line)
		if len(f) < 2 || string(f[0]) != "STAT" {
			return nil, errRefused
		}
		if len(f) > 2 {
			out[string(f[1])] = string(f[2])
		}
	}
	return nil, errRefused
}
