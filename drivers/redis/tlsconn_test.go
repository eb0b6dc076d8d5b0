//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd || solaris || illumos

package redis

import (
	"errors"
	"net"
	"syscall"
	"testing"
	"time"
)

// TestPeekGuard: go-redis's own socket check (check) runs only when no
// byte waits on the socket; a waiting byte (encrypted, under TLS) makes
// the connection unfit without go-redis reading it.
func TestPeekGuard(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	raw, err := client.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	g := peekGuard{raw}
	checked := 0
	check := func(uintptr) bool { checked++; return true }

	if err := g.Read(check); err != nil || checked != 1 {
		t.Fatalf("idle socket: %v, check ran %d times, want nil and once", err, checked)
	}
	if _, err := server.Write([]byte{0x17}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if err := g.Read(check); !errors.Is(err, errTLSBytesWaiting) || checked != 1 {
		t.Fatalf("a byte waiting: %v, check ran %d times, want errTLSBytesWaiting and no check", err, checked)
	}
	var b [1]byte
	if _, err := client.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	server.Close()
	time.Sleep(50 * time.Millisecond)
	peeked := -1
	if err := g.Read(func(fd uintptr) bool {
		peeked, _, _ = syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return true
	}); err != nil || peeked != 0 {
		t.Fatalf("closed by the server: %v, peek read %d bytes: want go-redis's check to see EOF (0)", err, peeked)
	}
}
