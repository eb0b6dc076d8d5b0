package memcached

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bradfitz/gomemcache/memcache"

	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/internal/replyguard"
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
	sv    *servers
	ctx   context.Context // the call being served: dials use it
	limit atomic.Int64    // the call's deadline, Unix ns

	mu    sync.Mutex
	conns map[*limitedConn]struct{} // open sockets, for abort
}

func newSession(sv *servers, timeout time.Duration) *session {
	s := &session{sv: sv, conns: make(map[*limitedConn]struct{})}
	s.mc = memcache.NewFromSelector(sv)
	s.mc.Timeout = timeout
	s.mc.MaxIdleConns = 1 // per server: a session serves one call at a time
	s.mc.DialContext = s.dial
	return s
}

func (s *session) dial(_ context.Context, network, address string) (net.Conn, error) {
	d := net.Dialer{Deadline: time.Unix(0, s.limit.Load())}
	nc, err := s.sv.dial(s.ctx, &d, network, address)
	if err != nil {
		return nil, err
	}
	// Guarded: a VALUE that declares more than any item of ours holds
	// fails the connection before gomemcache allocates it (V4).
	c := &limitedConn{Conn: replyguard.NewMemcached(nc), s: s}
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

// pool hands out sessions, at most maxConns of them alive at once (in use
// or idle), so a Store holds at most maxConns sockets to each server: a
// session holds at most one socket per server. Up to maxIdle sessions are
// kept idle for reuse.
//
// A caller first takes a token of slots (one per session in use), waiting
// for one no longer than its context, then reuses an idle session or,
// when none is idle, makes a new one. Sessions are only made while none
// is idle, and a release puts its session back (or closes it) before it
// gives its token back, so the sessions alive never outnumber the tokens:
// at most maxConns. A waiting caller waits in its own goroutine, on the
// token channel (FIFO), its context and done.
type pool struct {
	sv      *servers
	timeout time.Duration // a session's socket timeout, and the wait of a ctx without deadline
	maxIdle int
	slots   chan struct{} // a token per session in use; capacity maxConns
	done    chan struct{} // closed by close: wakes every waiter

	mu     sync.Mutex
	idle   []*session
	closed bool
}

func newPool(sv *servers, timeout time.Duration, maxConns, maxIdle int) *pool {
	return &pool{
		sv:      sv,
		timeout: timeout,
		maxIdle: min(maxIdle, maxConns),
		slots:   make(chan struct{}, maxConns),
		done:    make(chan struct{}),
	}
}

// acquire returns a session serving ctx until release. It waits for a
// free one until ctx ends (ErrTimeout at its deadline, or p.timeout from
// now when ctx has none) or the pool closes (ErrClosed).
func (p *pool) acquire(ctx context.Context) (*session, func(), error) {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(p.timeout)
	}
	if err := p.wait(ctx, ok, deadline); err != nil {
		return nil, nil, err
	}
	var s *session
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		<-p.slots
		return nil, nil, fmt.Errorf("memcached: %w", driver.ErrClosed)
	}
	if n := len(p.idle); n > 0 {
		s = p.idle[n-1]
		p.idle = p.idle[:n-1]
	}
	p.mu.Unlock()
	if s == nil {
		s = newSession(p.sv, p.timeout) // no I/O: it dials on first use
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
			<-p.slots
			return
		}
		p.release(s)
	}, nil
}

// wait takes a token of slots, waiting until ctx ends or deadline passes
// (when ctx has none: hasDeadline false) or the pool closes.
func (p *pool) wait(ctx context.Context, hasDeadline bool, deadline time.Time) error {
	select {
	case p.slots <- struct{}{}:
		return nil
	default:
	}
	var expired <-chan time.Time
	if !hasDeadline {
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		expired = t.C
	}
	select {
	case p.slots <- struct{}{}:
		if err := ctx.Err(); err != nil {
			// Both were ready and select chose the slot: the call
			// could not finish anyway.
			<-p.slots
			return classify(ctx, "wait for a connection", err)
		}
		return nil
	case <-ctx.Done():
		return classify(ctx, "wait for a connection", ctx.Err())
	case <-expired:
		return fmt.Errorf("memcached: wait for a connection: %w: %w",
			driver.ErrTimeout, context.DeadlineExceeded)
	case <-p.done:
		return fmt.Errorf("memcached: wait for a connection: %w", driver.ErrClosed)
	}
}

// slot takes a token of slots for a connection of the caller's own,
// outside the sessions, waiting as acquire does, and closes an idle
// session if there is one: the sessions alive and that connection stay
// within maxConns, as the sessions alone do. The func returned gives the
// token back.
func (p *pool) slot(ctx context.Context) (func(), error) {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(p.timeout)
	}
	if err := p.wait(ctx, ok, deadline); err != nil {
		return nil, err
	}
	var s *session
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		s = p.idle[n-1]
		p.idle = p.idle[:n-1]
	}
	p.mu.Unlock()
	if s != nil {
		s.close()
	}
	return func() { <-p.slots }, nil
}

// release keeps s idle, or closes it, then gives its token back.
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
	<-p.slots
}

// close closes every idle session and wakes every waiter (ErrClosed);
// sessions in use close on release.
func (p *pool) close() {
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	if !p.closed {
		p.closed = true
		close(p.done)
	}
	p.mu.Unlock()
	for _, s := range idle {
		s.close()
	}
}
