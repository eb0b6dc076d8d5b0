package postgres

import (
	"crypto/tls"
	"errors"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
)

// alive reports whether a pooled connection may be used: nothing waits on
// its socket. An idle connection has nothing to read; bytes or an end of
// stream mean the server closed it (a restart sends FATAL 57P01 and
// closes), and a statement sent on it would fail after the fact. The
// check is one non-blocking recv (MSG_PEEK), no round trip; it takes no
// read lock (pgconn's background reader may hold it).
func alive(pc *pgconn.PgConn) bool {
	nc := pc.Conn()
	if t, ok := nc.(*tls.Conn); ok {
		nc = t.NetConn()
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return true
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	live := true
	err = raw.Control(func(fd uintptr) {
		var b [1]byte
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case n > 0, n == 0 && err == nil: // bytes waiting, or end of stream
			live = false
		case err != nil && !errors.Is(err, syscall.EAGAIN) && !errors.Is(err, syscall.EWOULDBLOCK):
			live = false
		}
	})
	return err == nil && live
}
