package redis

import (
	"context"
	"fmt"
	"net"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/internal/ownclient"
	"github.com/fleetstore/fleetstore/internal/rediscore"
	"github.com/fleetstore/fleetstore/internal/replyguard"
)

// FromClient returns a driver that opens Stores on c, a client the
// application built and keeps: its instrumentation (redisotel hooks), its
// credentials provider, its TLS setup stay as they are. Hand it to
// fleetstore.OpenDriver with a URL that holds only the scheme and the
// common parameters:
//
//	rdb := goredis.NewClient(&goredis.Options{
//		Addr:                  "cache:6379",
//		ContextTimeoutEnabled: true,                  // CONTRACT T1
//		MaxRetries:            -1,                    // T5
//		DialerRetries:         1,                     // T2
//		DialTimeout:           50 * time.Millisecond, // ≤ the Store's timeout: T1, T4
//	})
//	store, err := fleetstore.OpenDriver(redis.FromClient(rdb),
//		"redis://?timeout=50ms&key_prefix=edge")
//
// c is a *goredis.Client (one server, or a Sentinel-managed master from
// NewFailoverClient) or a *goredis.ClusterClient; NewUniversalClient
// returns one of them. Open refuses, with ErrInvalid naming the setting
// ("client: MaxRetries"), a client whose settings would break the
// contract, as read from c.Options() after go-redis filled in its
// defaults:
//
//   - ContextTimeoutEnabled false: the call's deadline would not reach
//     the socket (T1).
//   - MaxRetries above 0 (go-redis's default 3, when left 0 on a
//     *Client): a script whose reply was lost would be re-sent (T5). Set
//     -1.
//   - DialerRetries above 1 (go-redis's default 5, when left 0): a
//     refused dial would be retried until the budget runs out, a timeout
//     instead of ErrUnavailable (T2). Set 1.
//   - DialTimeout longer than the Store's timeout (go-redis's default
//     5s): go-redis dials on a context of its own, so the dial would
//     outlive the call (T1, T4). A negative one (every dial timed out
//     at once) is refused too.
//   - ReadTimeout or WriteTimeout of -2 (no socket deadline at all): a
//     server that never answers would hold the call past its budget (T1).
//     On a *Client longer read and write timeouts are kept: with
//     ContextTimeoutEnabled go-redis sets each socket deadline to the
//     earlier of the timeout and the call's deadline.
//   - on a *ClusterClient, ReadTimeout or WriteTimeout longer than the
//     Store's timeout (go-redis's default 5s), or -1 (no deadline): the
//     slot-map reload the driver asks for after a failed call runs on
//     go-redis's own context, bounded by them alone, and would outlive
//     the call (T4).
//   - a *goredis.Ring, or any other UniversalClient: a Ring moves a
//     down shard's keys to the others, forgetting its claims.
//
// Not detected: a NewFailoverClient built with ReplicaOnly (or
// RouteRandomly / RouteByLatency, on NewFailoverClusterClient) sends the
// scripts to a replica, which refuses their writes (READONLY), or with
// replica-read-only off keeps claims the master never sees; the *Client
// it returns shows neither in Options(), so Open cannot refuse it. Build a
// failover client for a Store without them, as a Ring is refused.
//
// The URL's scheme is redis, rediss or redis+cluster (any other, memory://
// among them, is ErrInvalid naming "url: scheme": the Store would report
// it as its StoreInfo.Scheme). The URL takes timeout, key_prefix and
// fallback_*; a host, a password or a client parameter is ErrInvalid
// (they are the client's). Open does no
// network I/O (T3). Several Stores may share c.
//
// Store.Close does not close c: the application that built it closes it,
// after the Stores on it. Close releases everything of the Store's own
// (its goroutines; the connections it used go back to c's pool) and
// leaves c working (T4 on such a Store: nothing of the Store's is left
// running).
//
// The driver's own defences on the connections it dials are c's only
// when c dials through [Dialer]. Without it a server that lies about a
// reply's size makes go-redis allocate what it declares (V4 does not
// hold: a 2^30-element map in reply to HELLO stalls the process), a
// failed dial is logged as c's owner set go-redis's logger up, and over
// TLS a pooled connection the server closed fails the next call instead
// of being dialed again. FromClient does not refuse such a client: its
// bounds would apply to the application's own commands as well, and the
// application's client is exposed to its server already.
func FromClient(c goredis.UniversalClient) driver.Driver {
	return ownDriver{c: c}
}

// Dialer returns the dialer the driver's own clients dial with, for a
// client built for FromClient: go-redis's own (goredis.NewDialer(o): o's
// TLS and DialTimeout, read at each dial), with the driver's defences on
// every connection — replies bounded before go-redis parses them (8 MiB
// a value, 64 MiB a reply: package replyguard), which V4 needs (go-redis
// allocates whatever length a server declares); a failed dial that
// prints nothing; a pooled TLS connection the server closed found before
// it is reused (T5). The bounds hold for every command of the client,
// the application's own included. Set it before building the client:
//
//	opt := &goredis.Options{Addr: "cache:6379", ContextTimeoutEnabled: true,
//		MaxRetries: -1, DialerRetries: 1, DialTimeout: 50 * time.Millisecond}
//	opt.Dialer = redis.Dialer(opt)
//	rdb := goredis.NewClient(opt)
//
// For a cluster, o carries the ClusterOptions' DialTimeout and TLSConfig:
//
//	co.Dialer = redis.Dialer(&goredis.Options{
//		DialTimeout: co.DialTimeout, TLSConfig: co.TLSConfig})
func Dialer(
	o *goredis.Options,
) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return quiet(replyguard.RESP(checkableDialer(o)))
}

// ownDriver is the driver of FromClient.
type ownDriver struct {
	c goredis.UniversalClient
}

var (
	_ driver.Driver            = ownDriver{}
	_ driver.ExpiryGranularity = ownDriver{}
)

// ExpiryGranularity implements driver.ExpiryGranularity, as Driver's.
func (ownDriver) ExpiryGranularity() time.Duration { return Driver{}.ExpiryGranularity() }

// Open implements driver.Driver: it checks the URL and the client's
// settings, and dials nothing.
func (d ownDriver) Open(cfg driver.Config) (driver.Conn, error) {
	if err := ownclient.CheckURL(cfg.URL, "redis", "rediss", "redis+cluster"); err != nil {
		return nil, err
	}
	cl := &client{c: d.c}
	var s clientSettings
	switch c := d.c.(type) {
	case *goredis.Client:
		if c == nil {
			return nil, ownclient.Refuse("client", "is a nil *redis.Client")
		}
		o := c.Options()
		s = clientSettings{o.ContextTimeoutEnabled, o.MaxRetries, o.DialerRetries,
			o.DialTimeout, o.ReadTimeout, o.WriteTimeout, false}
	case *goredis.ClusterClient:
		if c == nil {
			return nil, ownclient.Refuse("client", "is a nil *redis.ClusterClient")
		}
		o := c.Options()
		s = clientSettings{o.ContextTimeoutEnabled, o.MaxRetries, o.DialerRetries,
			o.DialTimeout, o.ReadTimeout, o.WriteTimeout, true}
		cl.cluster = true
	case nil:
		return nil, ownclient.Refuse("client", "is nil")
	default:
		return nil, ownclient.Refuse("client", fmt.Sprintf("a %T: want a *redis.Client "+
			"(NewClient, NewFailoverClient) or a *redis.ClusterClient; a Ring moves "+
			"a down shard's keys to the others, forgetting its claims", d.c))
	}
	if err := s.check(cfg.Timeout); err != nil {
		return nil, err
	}
	return rediscore.New(ownClient{cl}, cfg, cfg.URL.Redacted()), nil
}

// noClusterDeadline is why a cluster client's read and write timeouts
// need a deadline.
const noClusterDeadline = "the slot-map reload after a failed call runs on " +
	"go-redis's own context, bounded by it alone, and would outlive the call " +
	"(CONTRACT T4); give a duration at most the Store's timeout"

// clientSettings are the go-redis settings FromClient checks, from Options
// or ClusterOptions after go-redis's defaults.
type clientSettings struct {
	contextTimeout            bool
	maxRetries, dialerRetries int
	dial, read, write         time.Duration
	cluster                   bool
}

// check refuses the settings that would break the contract for a Store of
// the given budget (see FromClient).
func (s clientSettings) check(budget time.Duration) error {
	switch {
	case !s.contextTimeout:
		return ownclient.Refuse("ContextTimeoutEnabled", "is false: the call's deadline "+
			"would not reach the socket (CONTRACT T1); set it true")
	case s.maxRetries > 0:
		return ownclient.Refuse("MaxRetries", fmt.Sprintf("is %d (go-redis's default "+
			"when left 0 is 3): a script whose reply was lost would be re-sent "+
			"(CONTRACT T5); set it -1", s.maxRetries))
	case s.dialerRetries > 1:
		return ownclient.Refuse("DialerRetries", fmt.Sprintf("is %d (go-redis's default "+
			"when left 0 is 5): a refused dial would be retried past the budget "+
			"(CONTRACT T2); set it 1", s.dialerRetries))
	case s.read < 0:
		return ownclient.Refuse("ReadTimeout", "is -2, no socket deadline: a server that "+
			"never answers would hold the call past its budget (CONTRACT T1); "+
			"leave it 0 or give a duration")
	case s.write < 0:
		return ownclient.Refuse("WriteTimeout", "is -2, no socket deadline: a server that "+
			"never reads would hold the call past its budget (CONTRACT T1); "+
			"leave it 0 or give a duration")
	case s.dial <= 0:
		return ownclient.Refuse("DialTimeout", fmt.Sprintf("is %v: a dial would time out "+
			"at once (CONTRACT T2); give a duration at most the Store's timeout", s.dial))
	case s.cluster && s.read == 0:
		// ClusterOptions turns -1 into 0, and a 0 reaches the node
		// clients as -1: no deadline on the slot-map reload.
		return ownclient.Refuse("ReadTimeout", "is -1, no deadline: "+noClusterDeadline)
	case s.cluster && s.write == 0:
		return ownclient.Refuse("WriteTimeout", "is -1, no deadline: "+noClusterDeadline)
	}
	if err := ownclient.Timeout("DialTimeout", s.dial, budget); err != nil {
		return err
	}
	if s.cluster {
		// The slot-map reload after a failed call runs on go-redis's own
		// context, bounded by the read and write timeouts alone.
		if err := ownclient.Timeout("ReadTimeout", s.read, budget); err != nil {
			return err
		}
		return ownclient.Timeout("WriteTimeout", s.write, budget)
	}
	return nil
}

// ownClient is the adapter over a client the application owns: Close
// leaves it open.
type ownClient struct{ *client }

// Close implements rediscore.Client: the application closes its client.
func (ownClient) Close() error { return nil }
