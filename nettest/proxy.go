package nettest

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
)

// ReplyFilter sees each chunk a server sends on one proxied connection and
// returns what of it reaches the client (nil: the chunk is lost after the
// server acted on its request). hangUp true drops the chunk and closes
// both sides of the connection.
type ReplyFilter func(chunk []byte) (out []byte, hangUp bool)

// Proxy forwards TCP connections to a real server and passes each reply
// through, unless DropReplies is on or a ReplyFilter says otherwise: a
// call whose reply is lost after the server ran it (T5). Its methods are
// safe from several goroutines.
type Proxy struct {
	ln        net.Listener
	target    string
	newFilter func() ReplyFilter
	drop      atomic.Bool
	closed    atomic.Int64
	wg        sync.WaitGroup
	once      sync.Once
	mu        sync.Mutex
	conns     []net.Conn
	shut      bool // Close has closed conns: a connection accepted since is closed at once
}

// NewProxy starts a proxy on a free loopback port that forwards to target
// ("host:port"). newFilter, when not nil, is called once per connection
// for that connection's filter (a filter may keep state, e.g. what it has
// seen); nil passes every reply. The proxy and its connections are closed
// when t ends.
func NewProxy(t TB, target string, newFilter func() ReplyFilter) *Proxy {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	return NewProxyAt(t, "127.0.0.1:0", target, newFilter)
}

// NewProxyAt is NewProxy listening on addr: given a RefusedAddr, the
// server appears at an address the Store was opened on (T3).
func NewProxyAt(t TB, addr, target string, newFilter func() ReplyFilter) *Proxy {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("nettest: proxy: %v", err)
		return nil
	}
	p := &Proxy{ln: ln, target: target, newFilter: newFilter}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(p.Close)
	return p
}

// Addr is the proxy's "127.0.0.1:PORT".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// DropReplies turns the loss of replies on or off: while on, every reply
// on every connection is thrown away before the filter sees it, and the
// requests still reach the server (T5).
func (p *Proxy) DropReplies(on bool) { p.drop.Store(on) }

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
		if p.shut {
			// Accepted while Close ran: no one would close it.
			p.mu.Unlock()
			c.Close()
			s.Close()
			return
		}
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		filter := passAll
		if p.newFilter != nil {
			filter = p.newFilter()
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
			p.reply(c, s, filter)
		}()
	}
}

// reply copies the server's replies on s to the client on c until either
// side fails or the filter hangs up.
func (p *Proxy) reply(c, s net.Conn, filter ReplyFilter) {
	buf := make([]byte, 32<<10)
	for {
		n, err := s.Read(buf)
		if n > 0 && !p.drop.Load() {
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
}

func passAll(chunk []byte) ([]byte, bool) { return chunk, false }

// Close stops the proxy, closes both sides of every connection and waits
// for its goroutines to end. It is safe to call more than once.
func (p *Proxy) Close() {
	p.once.Do(func() {
		p.ln.Close()
		p.mu.Lock()
		p.shut = true
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
}
