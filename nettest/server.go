package nettest

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Server is a fake server on a loopback port: silent (NewSilent), hanging
// up (NewHangUp) or running a handler on each connection (NewGarbage,
// NewServer). Its methods are safe from several goroutines.
type Server struct {
	ln       net.Listener
	hold     bool           // keep each connection the client keeps, unread
	hangUp   bool           // close each connection at once
	serve    func(net.Conn) // else: run this on each, in a goroutine
	accepted atomic.Int64
	done     chan struct{} // closed when the accept loop has ended
	handlers sync.WaitGroup
	once     sync.Once

	mu     sync.Mutex
	conns  []net.Conn // accepted and not yet pruned; Close closes them
	pruned int        // len(conns) after the last prune
}

// NewSilent starts a server that accepts TCP connections and never
// writes a byte (T1, T4). It holds each connection with no goroutine of
// its own, so it adds one goroutine, its accept loop, however many the
// driver opens. The server is closed when t ends.
func NewSilent(t TB) *Server {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	return start(t, &Server{hold: true})
}

// NewHangUp starts a server that accepts TCP connections and closes each
// at once: the client's first read sees EOF. Accepted counts the dials
// (T3: Open makes none). The server is closed when t ends.
func NewHangUp(t TB) *Server {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	return start(t, &Server{hangUp: true})
}

// NewGarbage starts a server that answers every read, whatever it was,
// with reply: a server that speaks nonsense (V4). The server is closed
// when t ends.
func NewGarbage(t TB, reply []byte) *Server {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	return start(t, &Server{serve: func(c net.Conn) {
		buf := make([]byte, 4096)
		for {
			if _, err := c.Read(buf); err != nil {
				return
			}
			if _, err := c.Write(reply); err != nil {
				return
			}
		}
	}})
}

// NewServer starts a server that runs serve on each connection it
// accepts, in a goroutine of its own, for a fake that has to speak some of
// the protocol (a handshake) before it misbehaves. The connection is
// closed when serve returns, or by Close, which waits for every serve to
// return. The server is closed when t ends.
func NewServer(t TB, serve func(c net.Conn)) *Server {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	return start(t, &Server{serve: serve})
}

func start(t TB, s *Server) *Server {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("nettest: listen: %v", err)
		return nil
	}
	s.ln = ln
	s.done = make(chan struct{})
	go s.accept()
	t.Cleanup(s.Close)
	return s
}

// Addr is the server's "127.0.0.1:PORT".
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Accepted counts the connections the server has accepted.
func (s *Server) Accepted() int { return int(s.accepted.Load()) }

func (s *Server) accept() {
	defer close(s.done)
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.accepted.Add(1)
		if s.hangUp {
			c.Close()
			continue
		}
		s.mu.Lock()
		s.conns = append(s.conns, c)
		if s.hold && len(s.conns) >= 2*s.pruned+64 {
			s.prune(time.Microsecond)
		}
		s.mu.Unlock()
		if s.serve != nil {
			s.handlers.Add(1)
			go func() {
				defer s.handlers.Done()
				defer c.Close()
				s.serve(c)
			}()
		}
	}
}

// prune reads each held connection for up to window, discarding what the
// client sent, and closes and forgets those that reached EOF or failed.
// The accept loop prunes at doubling lengths with a window of next to
// nothing (a connection whose EOF is not there yet stays for the next
// time), so that a driver that dials once per call does not pile up
// sockets here: thousands in the fault suite. Called with mu held.
func (s *Server) prune(window time.Duration) {
	open := s.conns[:0]
	for _, c := range s.conns {
		_ = c.SetReadDeadline(time.Now().Add(window))
		_, err := io.Copy(io.Discard, c) // nil at EOF
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			open = append(open, c)
			continue
		}
		c.Close()
	}
	clear(s.conns[len(open):])
	s.conns = open
	s.pruned = len(open)
}

// StillOpen waits, for at most wait, until the client has closed every
// connection a silent server holds, and returns how many it has not (T4:
// Close releases every connection). It reads and discards what the
// client sent on each. Other servers hold no connection: 0.
func (s *Server) StillOpen(wait time.Duration) int {
	if !s.hold {
		return 0
	}
	deadline := time.Now().Add(wait)
	for {
		s.mu.Lock()
		s.prune(time.Millisecond)
		n := len(s.conns)
		s.mu.Unlock()
		if n == 0 || !time.Now().Before(deadline) {
			return n
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Close stops the server and closes every connection it holds, then
// waits for its goroutines to end. It is safe to call more than once.
func (s *Server) Close() {
	s.once.Do(func() {
		s.ln.Close()
		<-s.done
		s.mu.Lock()
		for _, c := range s.conns {
			c.Close()
		}
		s.conns = nil
		s.mu.Unlock()
		s.handlers.Wait()
	})
}
