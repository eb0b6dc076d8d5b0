package testserver

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// ReplyFilter sees each chunk a server sends on one proxied connection and
// returns what of it reaches the client (nil: the chunk is lost after the
// server acted on its request). hangUp true drops the chunk and closes
// both sides of the connection.
type ReplyFilter func(chunk []byte) (out []byte, hangUp bool)

// Proxy forwards TCP connections to a server, passing each reply through
// a ReplyFilter: tests lose or hold back replies with it.
type Proxy struct {
	ln     net.Listener
	target string
	filter func() ReplyFilter
	closed atomic.Int32
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  []net.Conn
}

// StartProxy listens on a free loopback port and forwards to target.
// newFilter, when not nil, is called once per connection for that
// connection's filter (a filter may keep state, e.g. what it has seen);
// nil passes every reply. The proxy and its connections are closed when
// the test ends.
func StartProxy(t testing.TB, target string, newFilter func() ReplyFilter) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testserver: proxy: %v", err)
	}
	p := &Proxy{ln: ln, target: target, filter: newFilter}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(p.close)
	return p
}

// Addr is the proxy's "127.0.0.1:PORT".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Closed counts the connections the client side has closed.
func (p *Proxy) Closed() int { return int(p.closed.Load()) }

func (p *Proxy) serve() {
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
		filter := passAll
		if p.filter != nil {
			filter = p.filter()
		}
		p.wg.Add(2)
		go func() {
			defer p.wg.Done()
			_, _ = io.Copy(s, c) // ends when the client closes
			p.closed.Add(1)
			s.Close()
		}()
		go func() {
			defer p.wg.Done()
			defer c.Close()
			buf := make([]byte, 32<<10)
			for {
				n, err := s.Read(buf)
				if n > 0 {
					out, hangUp := filter(buf[:n])
					if hangUp {
						s.Close()
						return
					}
					if len(out) > 0 {
						if _, err := c.Write(out); err != nil {
							return
						}
					}
				}
				if err != nil {
					return
				}
			}
		}()
	}
}

func passAll(chunk []byte) ([]byte, bool) { return chunk, false }

func (p *Proxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
