package nettest

import (
	"net"
	"strconv"
	"syscall"
	"time"
)

// RefusedAddr returns a loopback "127.0.0.1:PORT" where nothing listens,
// so that a dial there is refused (T2). The port was free a moment ago: a
// test may start a server on it later (T3, NewProxyAt).
func RefusedAddr(t TB) string {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("nettest: refused address: %v", err)
		return ""
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// BlackHole returns a loopback "127.0.0.1:PORT" whose SYNs are dropped,
// so that a dial there hangs until the dialer gives up (T1, T4: a dial
// ends with the budget). It is a listening socket with a backlog of 0
// that never accepts, its queue filled first by dials of its own, all
// closed when t ends. Where the system will not make one (the socket
// calls fail, or the backlog never fills), t is skipped.
func BlackHole(t TB) string {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Skipf("nettest: black hole: socket: %v", err)
		return ""
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Skipf("nettest: black hole: bind: %v", err)
		return ""
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Skipf("nettest: black hole: listen: %v", err)
		return ""
	}
	sa, err := syscall.Getsockname(fd)
	in4, ok := sa.(*syscall.SockaddrInet4)
	if err != nil || !ok {
		t.Skipf("nettest: black hole: getsockname: %v %T", err, sa)
		return ""
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(in4.Port))
	for range 16 {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err != nil {
			return addr // the queue is full: SYNs are dropped
		}
		t.Cleanup(func() { c.Close() })
	}
	t.Skipf("nettest: cannot fill a listen backlog here: no black hole")
	return ""
}
