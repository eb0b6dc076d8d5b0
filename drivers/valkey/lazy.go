package valkey

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/internal/replyguard"
)

// Backoff between two failed builds of the client: the first retry may
// start backoffMin after a failure, doubling up to backoffMax.
const (
	backoffMin = 50 * time.Millisecond
	backoffMax = time.Second
)

// lazyClient builds the valkey-go client on first use. valkey.NewClient
// dials (and, for a cluster, reads the slot map) before it returns, and
// fails when the server is down; Open must do no I/O and an outage must
// never stop the caller (CONTRACT T3). So:
//
//   - the first call starts one build in the background (single flight);
//     every call that needs the client meanwhile waits for that build or
//     its own deadline, whichever comes first;
//   - a failed build is not retried before its backoff has passed; a call
//     in that window fails at once with the failure's error, without I/O;
//     the first call after it starts the next build;
//   - once built, the client is kept: valkey-go reconnects on its own, on
//     the caller's deadline, after a restart or an outage.
//
// Close cancels a build's dials, waits for it and closes the client.
type lazyClient struct {
	opt       valkey.ClientOption
	newClient func(valkey.ClientOption) (valkey.Client, error)
	now       func() time.Time

	built atomic.Pointer[builtClient] // nil until a build succeeded

	// bg is canceled by close: it aborts the dials of a build in flight.
	bg     context.Context
	stopBG context.CancelFunc
	wg     sync.WaitGroup // the build goroutine

	mu       sync.Mutex
	building chan struct{} // closed when the running build ends; nil when none runs
	lastErr  error         // the last build's failure, classified
	failures int           // builds failed in a row
	retryAt  time.Time     // no build before this, after a failure
	closed   bool
}

type builtClient struct{ c valkey.Client }

func newLazyClient(opt valkey.ClientOption) *lazyClient {
	l := &lazyClient{opt: opt, newClient: valkey.NewClient, now: time.Now}
	l.bg, l.stopBG = context.WithCancel(context.Background())
	// Every dial, of the build and of later reconnects, also ends when the
	// Conn is closed.
	// Every connection is guarded: a reply that declares more than any of
	// ours can hold fails the connection before valkey-go allocates it, or
	// panics in its reader goroutine (V4).
	user := opt.DialCtxFn
	l.opt.DialCtxFn = func(
		ctx context.Context, dst string, d *net.Dialer, tc *tls.Config,
	) (net.Conn, error) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stop := context.AfterFunc(l.bg, cancel)
		defer stop()
		var c net.Conn
		var err error
		switch {
		case user != nil:
			c, err = user(ctx, dst, d, tc)
		case tc != nil:
			c, err = (&tls.Dialer{NetDialer: d, Config: tc}).DialContext(ctx, "tcp", dst)
		default:
			c, err = d.DialContext(ctx, "tcp", dst)
		}
		if err != nil {
			return nil, err
		}
		return replyguard.NewRESP(c), nil
	}
	return l
}

// get returns the client, building it first when needed. Errors are ctx's
// own (it ended while the build ran), the last build's (buildErr), or
// ErrClosed.
func (l *lazyClient) get(ctx context.Context) (valkey.Client, error) {
	if b := l.built.Load(); b != nil {
		return b.c, nil
	}
	l.mu.Lock()
	if b := l.built.Load(); b != nil {
		l.mu.Unlock()
		return b.c, nil
	}
	if l.closed {
		l.mu.Unlock()
		return nil, driver.ErrClosed
	}
	done := l.building
	if done == nil {
		if l.failures > 0 && l.now().Before(l.retryAt) {
			err := l.lastErr
			l.mu.Unlock()
			return nil, err
		}
		done = make(chan struct{})
		l.building = done
		l.wg.Add(1)
		go l.build(done)
	}
	l.mu.Unlock()

	select {
	case <-done:
	case <-ctx.Done():
		return nil, ctx.Err() // the Store classifies it
	}
	if b := l.built.Load(); b != nil {
		return b.c, nil
	}
	l.mu.Lock()
	err := l.lastErr
	l.mu.Unlock()
	if err == nil { // closed while building
		err = driver.ErrClosed
	}
	return nil, err
}

// build runs valkey.NewClient once; its dials and handshake are bounded by
// the dial timeout (at most the budget), the cluster's slot-map read by the
// write timeout.
func (l *lazyClient) build(done chan struct{}) {
	defer l.wg.Done()
	c, err := l.newClient(l.opt)
	if err == nil && c == nil {
		err = errNoClient // a builder's bug: failed like a build that did not connect
	}
	if err != nil && c != nil {
		c.Close()
		c = nil
	}
	l.mu.Lock()
	switch {
	case err == nil && l.closed:
		c.Close() // close has already looked for a client to close
	case err == nil:
		l.built.Store(&builtClient{c})
		l.failures, l.lastErr = 0, nil
	default:
		l.failures++
		l.retryAt = l.now().Add(backoff(l.failures))
		l.lastErr = buildErr(err)
	}
	l.building = nil
	l.mu.Unlock()
	close(done)
}

// errNoClient is the build error of a FromOption builder that returned
// neither a client nor an error.
var errNoClient = errors.New("the client builder returned a nil valkey.Client and no error")

// backoff is the wait after n failed builds in a row (n ≥ 1).
func backoff(n int) time.Duration {
	d := backoffMin
	for i := 1; i < n && d < backoffMax; i++ {
		d *= 2
	}
	return min(d, backoffMax)
}

// buildErr marks a failed build, which later calls get as it is, without
// I/O, until the backoff has passed (so only the driver can tell what it
// was): an error reply (WRONGPASS, NOAUTH) is the server's answer; a dial
// or handshake that ran out of time is a timeout; anything else (refused,
// unreachable) makes the store unavailable.
func buildErr(err error) error {
	if _, ok := valkey.IsValkeyErr(err); ok {
		return driver.ErrorReply(fmt.Errorf("connect: %w", err))
	}
	if isTimeout(err) {
		return fmt.Errorf("%w: connect: %w", driver.ErrTimeout, err)
	}
	return fmt.Errorf("%w: connect: %w", driver.ErrUnavailable, err)
}

// close stops any build and closes the client. Nothing calls get after it.
func (l *lazyClient) close() {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.stopBG()
	l.wg.Wait()
	if b := l.built.Load(); b != nil {
		b.c.Close()
	}
}

// isTimeout reports a deadline that passed: the context's, a socket's, or
// a dial's.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) ||
		errors.As(err, &ne) && ne.Timeout()
}
