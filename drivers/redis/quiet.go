package redis

import (
	"context"
	"net"
	"syscall"
	"time"
)

// quiet makes a failed dial print nothing. go-redis writes a line through
// its process-wide logger (stderr by default) for every dial its Dialer
// fails, and go-redis v9 has no logger per client (its Options have none;
// the line is logged on a context of its own, so the call's context cannot
// carry a logger to it either). quiet hands go-redis, for a failed dial, a
// connection that fails its first write with the dial's error instead: the
// call fails with that same error (refused or timed out: CONTRACT T2, T1),
// go-redis drops the connection, and nothing is logged. No process-wide
// setting is touched, so an application's or another library's
// goredis.SetLogger is never undone.
//
// The connection never reached a server, so failing its write re-sends
// nothing (T5).
func quiet(dial dialFunc) dialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return failedDial{err: dialError{err}, network: network, addr: addr}, nil
		}
		return c, nil
	}
}

// dialError is a failed dial's error as a failedDial's reads and writes
// return it: go-redis unwraps a connection's first error once, so the call
// fails with the dial's own error ("dial tcp HOST:PORT: connect: connection
// refused").
type dialError struct{ err error }

func (e dialError) Error() string { return e.err.Error() }
func (e dialError) Unwrap() error { return e.err }

// failedDial is a dial that failed, as a connection: every read and write
// returns the dial's error, and so does SyscallConn, which go-redis's pool
// health check calls before reusing an idle connection: a failed dial
// that a caller gave up waiting for, and that go-redis parked in its
// pool, is then dropped rather than failing a later call with an old
// error.
type failedDial struct {
	err           error
	network, addr string
}

func (f failedDial) Read([]byte) (int, error)              { return 0, f.err }
func (f failedDial) Write([]byte) (int, error)             { return 0, f.err }
func (f failedDial) SyscallConn() (syscall.RawConn, error) { return nil, f.err }
func (failedDial) Close() error                            { return nil }
func (f failedDial) LocalAddr() net.Addr                   { return dialAddr{network: f.network} }
func (f failedDial) RemoteAddr() net.Addr                  { return dialAddr(f) }
func (failedDial) SetDeadline(time.Time) error             { return nil }
func (failedDial) SetReadDeadline(time.Time) error         { return nil }
func (failedDial) SetWriteDeadline(time.Time) error        { return nil }

// dialAddr is the address a failedDial was meant for.
type dialAddr failedDial

func (a dialAddr) Network() string { return a.network }
func (a dialAddr) String() string  { return a.addr }
