package nettest_test

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore/nettest"
)

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func waitAccepted(t *testing.T, s *nettest.Server, n int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for s.Accepted() < n {
		if time.Now().After(deadline) {
			t.Fatalf("accepted %d connections in 2s, want %d", s.Accepted(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestSilent: the silent server never answers, holds 200 connections
// with no goroutine each, and StillOpen sees which the client closed.
func TestSilent(t *testing.T) {
	s := nettest.NewSilent(t)
	before := runtime.NumGoroutine()
	var conns []net.Conn
	for range 200 {
		c := dial(t, s.Addr())
		if _, err := c.Write([]byte("PING\r\n")); err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	waitAccepted(t, s, 200)
	if n := runtime.NumGoroutine(); n > before+2 {
		t.Errorf("%d goroutines holding 200 connections, %d before", n, before)
	}
	_ = conns[0].SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if n, err := conns[0].Read(make([]byte, 1)); n != 0 || !isTimeout(err) {
		t.Errorf("read from the silent server: %d bytes, %v; want a timeout", n, err)
	}
	for _, c := range conns[:150] {
		c.Close()
	}
	if n := s.StillOpen(time.Second); n != 50 {
		t.Errorf("StillOpen after 150 of 200 were closed: %d, want 50", n)
	}
	for _, c := range conns[150:] {
		c.Close()
	}
	if n := s.StillOpen(time.Second); n != 0 {
		t.Errorf("StillOpen after all were closed: %d, want 0", n)
	}
}

// TestSilentPrunes: a client that dials once per call and closes does not
// pile up sockets in the silent server, before any StillOpen.
func TestSilentPrunes(t *testing.T) {
	s := nettest.NewSilent(t)
	for range 2000 {
		c, err := net.Dial("tcp", s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		_, _ = c.Write([]byte("PING\r\n"))
		c.Close()
	}
	waitAccepted(t, s, 2000)
	if fds, err := os.ReadDir("/proc/self/fd"); err == nil && len(fds) > 500 {
		t.Errorf("%d open files after 2000 connections the client closed", len(fds))
	}
	if n := s.StillOpen(time.Second); n != 0 {
		t.Errorf("StillOpen: %d, want 0", n)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func TestHangUp(t *testing.T) {
	s := nettest.NewHangUp(t)
	for i := range 3 {
		c := dial(t, s.Addr())
		_ = c.SetReadDeadline(time.Now().Add(time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil || isTimeout(err) {
			t.Errorf("read %d: %v, want EOF or a reset", i, err)
		}
	}
	if n := s.Accepted(); n != 3 {
		t.Errorf("Accepted: %d, want 3", n)
	}
}

func TestGarbage(t *testing.T) {
	reply := []byte("-ERR garbage\r\n")
	s := nettest.NewGarbage(t, reply)
	c := dial(t, s.Addr())
	for range 2 {
		if _, err := c.Write([]byte("PING\r\n")); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(reply))
		_ = c.SetReadDeadline(time.Now().Add(time.Second))
		if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, reply) {
			t.Fatalf("reply %q %v, want %q", got, err, reply)
		}
	}
	if n := s.StillOpen(0); n != 0 {
		t.Errorf("StillOpen of a garbage server: %d, want 0", n)
	}
}

// echo is the real server behind the proxy.
func echo(t *testing.T) string {
	return nettest.NewServer(t, func(c net.Conn) { _, _ = io.Copy(c, c) }).Addr()
}

func roundTrip(t *testing.T, c net.Conn, msg string, wait time.Duration) (string, error) {
	t.Helper()
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	_ = c.SetReadDeadline(time.Now().Add(wait))
	n, err := c.Read(buf)
	return string(buf[:n]), err
}

func TestProxyDropReplies(t *testing.T) {
	p := nettest.NewProxy(t, echo(t), nil)
	c := dial(t, p.Addr())
	if got, err := roundTrip(t, c, "a", time.Second); got != "a" {
		t.Fatalf("through the proxy: %q %v, want %q", got, err, "a")
	}
	p.DropReplies(true)
	if got, err := roundTrip(t, c, "b", 100*time.Millisecond); !isTimeout(err) {
		t.Fatalf("with replies dropped: %q %v, want a timeout", got, err)
	}
	p.DropReplies(false)
	if got, err := roundTrip(t, c, "c", time.Second); got != "c" {
		t.Fatalf("after the drop: %q %v, want %q (b was lost)", got, err, "c")
	}
	c.Close()
	deadline := time.Now().Add(2 * time.Second)
	for p.Closed() != 1 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := p.Closed(); n != 1 {
		t.Errorf("Closed: %d, want 1", n)
	}
}

func TestProxyFilter(t *testing.T) {
	p := nettest.NewProxy(t, echo(t), func() nettest.ReplyFilter {
		return func(chunk []byte) ([]byte, bool) {
			if bytes.Equal(chunk, []byte("bye")) {
				return nil, true
			}
			return bytes.ToUpper(chunk), false
		}
	})
	c := dial(t, p.Addr())
	if got, err := roundTrip(t, c, "a", time.Second); got != "A" {
		t.Fatalf("filtered: %q %v, want %q", got, err, "A")
	}
	if got, err := roundTrip(t, c, "bye", time.Second); err == nil || isTimeout(err) {
		t.Fatalf("after a hang-up: %q %v, want EOF or a reset", got, err)
	}
}

// TestProxyAt: a refused address comes alive when a proxy listens there.
func TestProxyAt(t *testing.T) {
	addr := nettest.RefusedAddr(t)
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Fatalf("dial of the refused address %s succeeded", addr)
	}
	p := nettest.NewProxyAt(t, addr, echo(t), nil)
	if p.Addr() != addr {
		t.Fatalf("proxy on %s, want %s", p.Addr(), addr)
	}
	if got, err := roundTrip(t, dial(t, addr), "a", time.Second); got != "a" {
		t.Fatalf("through the proxy: %q %v", got, err)
	}
}

func TestBlackHole(t *testing.T) {
	addr := nettest.BlackHole(t)
	start := time.Now()
	c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
	if err == nil {
		c.Close()
		t.Fatal("dial of the black hole succeeded")
	}
	if !isTimeout(err) {
		t.Errorf("dial of the black hole: %v, want a timeout", err)
	}
	if d := time.Since(start); d < 90*time.Millisecond {
		t.Errorf("dial of the black hole failed after %v, want it to hang until its timeout", d)
	}
}
