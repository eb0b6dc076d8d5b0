// Package replyguard bounds what a server can make a client library
// allocate (CONTRACT V4, T1). go-redis, valkey-go and gomemcache parse
// replies themselves and trust the lengths a server declares: a reply that
// declares a 2 GiB bulk string, a billion-element array, a negative length
// or arrays nested thousands deep makes them allocate without bound, run
// out of memory, overflow the stack or panic in a reader goroutine (the
// process exits). Anything listening at the configured address can send
// that. So the drivers wrap every connection they dial in a guard that
// follows the reply stream as it is read, before the client sees it, and
// fails the connection (a read error, which the client reports and the
// Store classifies as ErrUnavailable) at the first header that declares
// more than any reply of ours can hold:
//
//   - RESP (Redis, Valkey): a bulk length above MaxBulk, an aggregate count
//     above MaxElems, nesting deeper than MaxDepth, a length that is not a
//     decimal integer ≥ -1, a streamed (?) length, a line longer than
//     MaxLine, a reply longer than MaxReply bytes, an unknown type byte;
//   - memcached: a line longer than MaxLine, a VALUE longer than MaxBulk,
//     more than MaxReply bytes before the END of a get.
//
// The limits are far above anything the scripts, the handshake or CLUSTER
// SLOTS return, and far below what hurts a process. A header line is
// handed to the client only once it is complete and checked; payload
// bytes pass as they come.
package replyguard

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
)

// The limits.
const (
	MaxLine  = 64 << 10 // bytes of one header, status or error line, CRLF included
	MaxBulk  = 8 << 20  // bytes of one bulk string or memcached value
	MaxElems = 1 << 17  // elements of one aggregate (CLUSTER SLOTS of a full cluster: 16384)
	MaxDepth = 16       // aggregates nested in one reply (CLUSTER SHARDS: 4)
	MaxReply = 64 << 20 // bytes of one top-level reply
)

// ErrHostile is the error of a connection whose server sent a reply
// beyond the limits.
var ErrHostile = errors.New("server reply beyond the driver's limits")

// DialFunc is net.Dialer.DialContext's shape.
type DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error)

// RESP wraps dial: every connection it returns is guarded as RESP.
func RESP(dial DialFunc) DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return NewRESP(c), nil
	}
}

// NewRESP guards c, a connection to a RESP server.
func NewRESP(c net.Conn) net.Conn { return guard(c, &stream{p: &respParser{}}) }

// NewMemcached guards c, a connection to a memcached server.
func NewMemcached(c net.Conn) net.Conn { return guard(c, &stream{p: mcParser{}}) }

func guard(c net.Conn, p parser) net.Conn {
	g := &conn{Conn: c, p: p}
	if sc, ok := c.(syscall.Conn); ok {
		raw, err := sc.SyscallConn()
		if err != nil {
			raw = nil
		}
		return &sysConn{conn: g, sc: sc, raw: raw}
	}
	return g
}

// sysConn is a guarded connection over a socket: go-redis checks an idle
// pooled connection through its file descriptor (a peek that finds a
// closed or chattering socket), which a plain wrapper would hide, so that
// a server restart between two calls stays invisible (T5).
//
// go-redis asks for the RawConn at every check, that is at every call
// that takes a pooled connection; a socket's RawConn stays valid for the
// connection's life (once closed, its methods fail, as a new one's
// would), so the one made at dial is kept rather than one allocated per
// call.
type sysConn struct {
	*conn
	sc  syscall.Conn
	raw syscall.RawConn // sc's, made at dial; nil: ask sc each time
}

// SyscallConn implements syscall.Conn.
func (c *sysConn) SyscallConn() (syscall.RawConn, error) {
	if c.raw != nil {
		return c.raw, nil
	}
	return c.sc.SyscallConn()
}

// parser follows a reply stream. feed is given the bytes read so far that
// the client has not been handed yet, and returns how many of them may be
// handed over, or an error.
type parser interface {
	feed(b []byte) (int, error)
}

// protocol reads the lines of a line-based protocol (RESP, memcached's
// text protocol) for a stream.
type protocol interface {
	// header checks one complete line, CRLF included, and returns how many
	// payload bytes follow it (with their CRLF) and whether a reply ends
	// with it.
	header(line []byte) (payload int64, end bool, err error)
	// payloadEnd is called when a payload has passed, and reports whether
	// a reply ends with it.
	payloadEnd() bool
}

// stream is the parser of a line-based protocol: lines are checked once
// complete (never longer than MaxLine), payloads pass as they come, and no
// reply grows past MaxReply bytes.
type stream struct {
	p       protocol
	payload int64 // bytes of the payload (with its CRLF) still to pass
	inReply int64 // bytes of the current reply so far
}

func (s *stream) feed(b []byte) (int, error) {
	done := 0
	for done < len(b) {
		if s.payload > 0 {
			n := min(s.payload, int64(len(b)-done))
			s.payload -= n
			if err := s.count(n); err != nil {
				return done, err
			}
			done += int(n)
			if s.payload == 0 && s.p.payloadEnd() {
				s.inReply = 0
			}
			continue
		}
		rest := b[done:]
		end := bytes.IndexByte(rest, '\n')
		if end < 0 && len(rest) <= MaxLine {
			return done, nil // wait for the rest of the line
		}
		if end < 0 || end+1 > MaxLine {
			return done, fmt.Errorf("a line longer than %d bytes", MaxLine)
		}
		line := rest[:end+1]
		if err := s.count(int64(len(line))); err != nil {
			return done, err
		}
		payload, replyEnd, err := s.p.header(line)
		if err != nil {
			return done, err
		}
		s.payload = payload
		if replyEnd {
			s.inReply = 0
		}
		done += len(line)
	}
	return done, nil
}

// count adds n bytes to the current reply.
func (s *stream) count(n int64) error {
	s.inReply += n
	if s.inReply > MaxReply {
		return fmt.Errorf("a reply longer than %d bytes", MaxReply)
	}
	return nil
}

// conn is a guarded connection: Read hands the client only checked bytes.
type conn struct {
	net.Conn
	p    parser
	buf  []byte // read from the server, not yet handed over
	ok   int    // buf[:ok] is checked
	fail error
}

func (c *conn) Read(b []byte) (int, error) {
	for {
		if c.ok > 0 {
			n := copy(b, c.buf[:c.ok])
			c.buf = c.buf[:copy(c.buf, c.buf[n:])]
			c.ok -= n
			return n, nil
		}
		if c.fail != nil {
			return 0, c.fail
		}
		if len(c.buf) == cap(c.buf) {
			grown := make([]byte, len(c.buf), max(2*cap(c.buf), 4096))
			copy(grown, c.buf)
			c.buf = grown
		}
		n, err := c.Conn.Read(c.buf[len(c.buf):cap(c.buf)])
		c.buf = c.buf[:len(c.buf)+n]
		if n > 0 {
			ok, perr := c.p.feed(c.buf[c.ok:])
			c.ok += ok
			if perr != nil {
				c.fail = fmt.Errorf("%w: %s from %s", ErrHostile, perr, c.RemoteAddr())
				c.Conn.Close()
			}
		}
		if err != nil && c.ok == 0 {
			return 0, err
		}
	}
}
