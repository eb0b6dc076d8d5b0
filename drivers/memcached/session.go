package memcached

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bradfitz/gomemcache/memcache"
)

// A session is a gomemcache client that serves one call at a time, so that
// the call's deadline can be laid on its sockets: gomemcache takes no
// context and sets each socket's deadline to now + Client.Timeout. Every
// socket a session dials is a limitedConn, whose SetDeadline never goes past
// the session's limit, the deadline of the call it serves. An I/O therefore
// fails by the call's deadline (T1), with no goroutine left behind (T4), and
// a cancelled context cuts the socket deadlines to the past.
type session struct {
	mc    *memcache.Client
	ctx   context.Context // the call being served: dials use it
	limit atomic.Int64    // the call's deadline, Unix ns

	mu    sync.Mutex
	conns map[*limitedConn]struct{} // open sockets, for abort
}

func newSession(sv *servers, timeout time.Duration) *session {
	s := &session{conns: make(map[*limitedConn]struct{})}
	s.mc = memcache.NewFromSelector(sv)
	s.mc.Timeout = timeout
	s.mc.MaxIdleConns = 1 // per server: a session serves one call at a time
	s.mc.DialContext = s.dial
	return s
}

func (s *session) dial(_ context.Context, network, address string) (net.Conn, error) {
	d := net.Dialer{Deadline: time.Unix(0, s.limit.Load())}
	nc, err := d.DialContext(s.ctx, network, address)
	if err != nil {
		return nil, err
	}
	c := &limitedConn{Conn: nc, s: s}
	s.mu.Lock()
	s.conns[c] = struct{}{}
	s.mu.Unlock()
	c.SetDeadline(time.Now().Add(s.mc.Timeout))
	return c, nil
}

// abort ends the call's I/O now: the context was cancelled or its deadline
// passed.
func (s *session) abort() {
	s.limit.Store(1)
	past := time.Unix(0, 1)
	s.mu.Lock()
	for c := range s.conns {
		c.Conn.SetDeadline(past)
	}
	s.mu.Unlock()
}

// close closes every socket of the session.
func (s *session) close() {
	s.mc.Close() // the idle ones, from gomemcache's pool
	s.mu.Lock()
	conns := s.conns
	s.conns = make(map[*limitedConn]struct{})
	s.mu.Unlock()
	for c := range conns {
		c.Conn.Close()
	}
}

// limitedConn is a socket whose deadline never passes its session's limit.
type limitedConn struct {
	net.Conn
	s    *session
	once sync.Once
}

func (c *limitedConn) SetDeadline(t time.Time) error {
	for {
		lim := c.s.limit.Load()
		d := t
		if t.UnixNano() > lim {
			d = time.Unix(0, lim)
		}
		err := c.Conn.SetDeadline(d)
		if c.s.limit.Load() == lim { // else abort raced with us: apply its limit
			return err
		}
	}
}

func (c *limitedConn) Close() error {
	c.once.Do(func() {
		c.s.mu.Lock()
		delete(c.s.conns, c)
		c.s.mu.Unlock()
	})
	return c.Conn.Close()
}

// pool keeps idle sessions for reuse: up to maxIdle of them, each holding at
// most one idle socket per server. A call finding none makes a new one.
type pool struct {
	sv      *servers
	timeout time.Duration
	maxIdle int

	mu     sync.Mutex
	idle   []*session
	closed bool
}

// acquire returns a session serving ctx until release.
func (p *pool) acquire(ctx context.Context, fallback time.Duration) (*session, func()) {
	var s *session
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		s = p.idle[n-1]
		p.idle = p.idle[:n-1]
	}
	p.mu.Unlock()
	if s == nil {
		s = newSession(p.sv, p.timeout)
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(fallback)
	}
	s.ctx = ctx
	s.limit.Store(deadline.UnixNano())
	stop := context.AfterFunc(ctx, s.abort)
	return s, func() {
		s.ctx = nil
		if !stop() {
			// abort ran or is running: the call failed and its sockets
			// are dead; do not reuse the session.
			s.close()
			return
		}
		p.release(s)
	}
}

func (p *pool) release(s *session) {
	p.mu.Lock()
	if !p.closed && len(p.idle) < p.maxIdle {
		p.idle = append(p.idle, s)
		s = nil
	}
	p.mu.Unlock()
	if s != nil {
		s.close()
	}
}

// close closes every idle session; sessions in use close on release.
func (p *pool) close() {
	p.mu.Lock()
	idle := p.idle
	p.idle, p.closed = nil, true
	p.mu.Unlock()
	for _, s := range idle {
		s.close()
	}
}
