//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd || solaris || illumos

package redis

import (
	"crypto/tls"
	"errors"
	"net"
	"syscall"
)

// checkable returns c, a connection go-redis's own dialer made, so that
// go-redis's pool can tell before reusing it that the server closed it.
//
// The pool peeks at a connection's socket before handing it out again
// (a restarted server: EOF, dial a new one), but it cannot see the socket
// under a *tls.Conn and skips the check: after a server restart the first
// call would be written to the dead connection and fail, and it must not
// be re-sent (CONTRACT T5: a script may have run). So a TLS connection is
// given the socket's syscall.RawConn, behind a guard: go-redis reads
// through TLS (with no deadline) when it sees bytes waiting, and encrypted
// bytes are not a reply, so any bytes waiting make the connection unfit
// instead, and the pool dials a new one. Plain connections are returned
// as they are.
func checkable(c net.Conn) net.Conn {
	tc, ok := c.(*tls.Conn)
	if !ok {
		return c
	}
	sc, ok := tc.NetConn().(syscall.Conn)
	if !ok {
		return c
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return c
	}
	return &tlsConn{Conn: tc, raw: raw}
}

// tlsConn is a TLS connection whose socket go-redis's pool can check.
type tlsConn struct {
	*tls.Conn
	raw syscall.RawConn
}

// SyscallConn implements syscall.Conn, for go-redis's check.
func (c *tlsConn) SyscallConn() (syscall.RawConn, error) { return peekGuard{c.raw}, nil }

// errTLSBytesWaiting: bytes wait on a pooled TLS connection's socket.
var errTLSBytesWaiting = errors.New("tls: bytes waiting on an idle connection")

// peekGuard is a socket's RawConn whose Read fails when bytes are waiting
// on the socket, before go-redis's check sees them.
type peekGuard struct{ syscall.RawConn }

func (g peekGuard) Read(check func(fd uintptr) bool) error {
	waiting := false
	if err := g.RawConn.Read(func(fd uintptr) bool {
		var b [1]byte
		n, _, _ := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		waiting = n > 0
		return true
	}); err != nil {
		return err
	}
	if waiting {
		return errTLSBytesWaiting
	}
	return g.RawConn.Read(check) // go-redis's own peek: EOF when closed
}
