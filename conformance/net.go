package conformance

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
)

// silentListener accepts TCP connections and never answers (T1, T4). It
// holds them without a goroutine each, so it adds no goroutines.
type silentListener struct {
	ln       net.Listener
	mu       sync.Mutex
	conns    []net.Conn
	accepted atomic.Int64
	done     chan struct{}
}

func newSilentListener(t *clauseT) *silentListener {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("silent listener: %v", err)
	}
	s := &silentListener{ln: ln, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.accepted.Add(1)
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
		}
	}()
	t.Cleanup(s.close)
	return s
}

func (s *silentListener) addr() string { return s.ln.Addr().String() }

func (s *silentListener) close() {
	s.ln.Close()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.conns {
		c.Close()
	}
	s.conns = nil
}

// refusedAddr returns a loopback address where nothing listens (T2, T3).
func refusedAddr(t *clauseT) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("refused address: %v", err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// proxy forwards TCP connections to a server. While dropReplies is set it
// forwards requests but throws the server's replies away: the call ran, its
// reply was lost (T5).
type proxy struct {
	ln          net.Listener
	target      string
	dropReplies atomic.Bool
	wg          sync.WaitGroup
	mu          sync.Mutex
	conns       []net.Conn
}

// startProxy listens on addr ("127.0.0.1:0" for any port) and forwards to
// target.
func startProxy(t *clauseT, addr, target string) *proxy {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("proxy: %v", err)
	}
	p := &proxy{ln: ln, target: target}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(p.close)
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		p.wg.Add(2)
		go func() {
			defer p.wg.Done()
			_, _ = io.Copy(s, c)
			s.Close()
		}()
		go func() {
			defer p.wg.Done()
			buf := make([]byte, 32<<10)
			for {
				n, err := s.Read(buf)
				if n > 0 && !p.dropReplies.Load() {
					if _, werr := c.Write(buf[:n]); werr != nil {
						break
					}
				}
				if err != nil {
					break
				}
			}
			c.Close()
		}()
	}
}

func (p *proxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// garbageServer answers every read with reply: a server that speaks
// nonsense (V4).
func garbageServer(t *clauseT, reply []byte) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("garbage server: %v", err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				buf := make([]byte, 4096)
				for {
					if _, err := c.Read(buf); err != nil {
						return
					}
					if _, err := c.Write(reply); err != nil {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}
