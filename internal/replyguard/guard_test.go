package replyguard

import (
	"bytes"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"
)

// chunks is a net.Conn whose reads return the given chunks, then EOF, or
// then forever, when forever is set, the same bytes again and again.
type chunks struct {
	net.Conn
	parts   [][]byte
	forever []byte
	at      int // where in forever the next read starts
	closed  bool
}

func (c *chunks) Read(b []byte) (int, error) {
	if len(c.parts) == 0 && c.forever != nil {
		n := copy(b, c.forever[c.at:])
		c.at = (c.at + n) % len(c.forever)
		return n, nil
	}
	if len(c.parts) == 0 {
		return 0, io.EOF
	}
	n := copy(b, c.parts[0])
	if c.parts[0] = c.parts[0][n:]; len(c.parts[0]) == 0 {
		c.parts = c.parts[1:]
	}
	return n, nil
}

func (c *chunks) Close() error         { c.closed = true; return nil }
func (c *chunks) RemoteAddr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 6379} }

// readAll reads everything the guard hands over, in reads of 7 bytes
// then of 64 KiB (a client's small reads, then its large ones), and keeps
// the first keep bytes.
func readAll(c net.Conn, keep int) ([]byte, error) {
	var out []byte
	buf := make([]byte, 7)
	for i := 0; ; i++ {
		if i == 64 {
			buf = make([]byte, 64<<10)
		}
		n, err := c.Read(buf)
		out = append(out, buf[:min(n, max(keep-len(out), 0))]...)
		if err != nil {
			return out, err
		}
	}
}

// split cuts s into pieces of n bytes.
func split(s string, n int) [][]byte {
	var out [][]byte
	for len(s) > n {
		out = append(out, []byte(s[:n]))
		s = s[n:]
	}
	return append(out, []byte(s))
}

func TestRESPPassesReplies(t *testing.T) {
	t.Parallel()
	replies := []string{
		"+OK\r\n", "-ERR wrong\r\n", ":42\r\n", "_\r\n", "#t\r\n", ",3.14\r\n", "(12345678901234567890\r\n",
		"$5\r\nhello\r\n", "$-1\r\n", "$0\r\n\r\n", "=8\r\ntxt:abcd\r\n", "!3\r\nERR\r\n",
		"*2\r\n:1\r\n$5\r\nh\r\nij\r\n", "*-1\r\n", "*0\r\n", "%2\r\n+a\r\n:1\r\n+b\r\n*1\r\n:2\r\n",
		"~1\r\n+x\r\n", ">2\r\n+message\r\n$1\r\nx\r\n",
		"|1\r\n+key\r\n:1\r\n*2\r\n|0\r\n:1\r\n:2\r\n", // attributes, top-level and inside an array
		strings.Repeat("*1\r\n", MaxDepth) + ":1\r\n",
		"$" + "8388608" + "\r\n" + strings.Repeat("x", MaxBulk) + "\r\n",
	}
	stream := strings.Join(replies, "")
	for _, size := range []int{1, 3, 65536, len(stream)} {
		if size == 1 {
			stream := strings.Join(replies[:len(replies)-1], "") // not 8 MiB a byte at a time
			got, err := readAll(NewRESP(&chunks{parts: split(stream, size)}), len(stream))
			if !errors.Is(err, io.EOF) || string(got) != stream {
				t.Errorf("chunks of 1: read %d of %d bytes, err %v", len(got), len(stream), err)
			}
			continue
		}
		got, err := readAll(NewRESP(&chunks{parts: split(stream, size)}), len(stream))
		if !errors.Is(err, io.EOF) || string(got) != stream {
			t.Errorf("chunks of %d: read %d of %d bytes, err %v", size, len(got), len(stream), err)
		}
	}
}

func TestRESPRefusesHostile(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, give string }{
		{"huge bulk", "$2147483647\r\n"},
		{"bulk over the limit", "$8388609\r\n"},
		{"huge array", "*2147483647\r\n"},
		{"array over the limit", "*131073\r\n"},
		{"huge map", "%99999999\r\n"},
		{"negative length", "$-2\r\n"},
		{"negative count", "*-5\r\n"},
		{"streamed length", "$?\r\n"},
		{"not a number", "*1e9\r\n"},
		{"deep nesting", strings.Repeat("*1\r\n", MaxDepth+1) + ":1\r\n"}, // the valid levels pass
		{"endless line", "+" + strings.Repeat("a", MaxLine)},
		{"unknown type", "?what\r\n"},
		{"bare LF", "+OK\n"},
		{"endless reply", "*131072\r\n$8388608\r\n"}, // then y forever
		// Empty attributes must not close the array around them early, or
		// the reply's byte count restarts and MaxReply never trips.
		{"attributes hiding a long reply", "*20\r\n" + strings.Repeat("|0\r\n", 20) + strings.Repeat("$8388608\r\n"+strings.Repeat("a", MaxBulk)+"\r\n", 9)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			under := &chunks{parts: split("+OK\r\n"+tc.give, 65536)}
			if tc.name == "endless reply" {
				under.forever = bytes.Repeat([]byte("y"), 64<<10)
			}
			got, err := readAll(NewRESP(under), 1<<20)
			if !errors.Is(err, ErrHostile) {
				t.Fatalf("read %d bytes, err %v, want ErrHostile", len(got), err)
			}
			if !under.closed {
				t.Error("connection not closed")
			}
			// Nothing past the last complete, checked element reaches the
			// client: never the hostile header itself.
			if hdr := strings.SplitN(tc.give, "\r\n", 2)[0] + "\r\n"; len(tc.give) < 100 && hdr != "*1\r\n" && hdr != "*131072\r\n" && bytes.Contains(got, []byte(hdr)) {
				t.Errorf("the hostile header reached the client: %q", got[:min(len(got), 64)])
			}
			if !bytes.HasPrefix(got, []byte("+OK\r\n")) {
				t.Errorf("the reply before it was not passed: %q", got[:min(len(got), 20)])
			}
		})
	}
}

func TestMemcachedGuard(t *testing.T) {
	t.Parallel()
	good := "VALUE k 0 5 7\r\nhello\r\nVALUE k2 0 0 8\r\n\r\nEND\r\nSTORED\r\nVERSION 1.6.18\r\n"
	got, err := readAll(NewMemcached(&chunks{parts: split(good, 3)}), len(good))
	if !errors.Is(err, io.EOF) || string(got) != good {
		t.Errorf("good stream: %q %v", got, err)
	}
	for _, tc := range []struct{ name, give string }{
		{"huge value", "VALUE k 0 2147483647 1\r\n"},
		{"negative value", "VALUE k 0 -1 1\r\n"},
		{"short VALUE line", "VALUE k\r\n"},
		{"endless line", strings.Repeat("a", MaxLine+1)},
		{"endless get", "VALUE k 0 65534 1\r\n"}, // then the same value forever
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			under := &chunks{parts: split("STORED\r\n"+tc.give, 65536)}
			if tc.name == "endless get" {
				under.forever = append(bytes.Repeat([]byte("z"), 65534), "\r\nVALUE k 0 65534 1\r\n"...)
			}
			_, err := readAll(NewMemcached(under), 1<<20)
			if !errors.Is(err, ErrHostile) {
				t.Fatalf("err %v, want ErrHostile", err)
			}
		})
	}
}

// TestGuardedSocketCheckable: a guarded TCP connection still shows its
// socket to go-redis's pool check (syscall.Conn), and the RawConn it keeps
// from the dial behaves as a fresh one would: a peek finds nothing waiting
// while the peer is open, finds the peer's close (EOF), and fails once the
// connection itself is closed. SyscallConn allocates nothing per call.
func TestGuardedSocketCheckable(t *testing.T) { // not parallel: AllocsPerRun
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	peer := <-accepted
	if peer == nil {
		t.Fatal("accept failed")
	}
	g, ok := NewRESP(raw).(syscall.Conn)
	if !ok {
		t.Fatal("a guarded TCP connection hides its socket")
	}
	// peek is go-redis's check: 0 bytes and no error at the peer's close.
	peek := func() (n int, eof bool, err error) {
		rc, err := g.SyscallConn()
		if err != nil {
			return 0, false, err
		}
		err = rc.Read(func(fd uintptr) bool {
			var b [1]byte
			var e error
			n, _, e = syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			eof = n == 0 && e == nil
			return true
		})
		return n, eof, err
	}
	if n, eof, err := peek(); n > 0 || eof || err != nil {
		t.Fatalf("open, idle socket: peek %d bytes, eof %v, err %v", n, eof, err)
	}
	if allocs := testing.AllocsPerRun(100, func() { _, _ = g.SyscallConn() }); allocs != 0 {
		t.Errorf("SyscallConn: %v allocations per call, want 0", allocs)
	}
	_ = peer.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, eof, err := peek()
		if err != nil {
			t.Fatalf("peer closed: peek err %v", err)
		}
		if eof {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the peer's close is never seen through the kept RawConn")
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = g.(net.Conn).Close()
	if _, _, err := peek(); err == nil {
		t.Fatal("closed connection: peek succeeded")
	}
}
