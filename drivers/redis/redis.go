// Package redis is the Redis driver of fleetstore (go-redis v9): one Lua
// script call per Hit, on the server's clock, on a single server, a Redis
// Cluster or a Sentinel-managed master. Blank-import it and open a URL:
//
//	import _ "github.com/fleetstore/fleetstore/drivers/redis"
//
//	fleetstore.Open("redis://cache:6379/0?timeout=50ms")
//	// TLS
//	fleetstore.Open("rediss://:PASSWORD@cache.example.com:6380/0")
//	// TLS: own CA, client certificate
//	fleetstore.Open("rediss://cache.example.com:6380/0?tls_ca_file=/etc/fleet/ca.pem" +
//		"&tls_cert_file=/etc/fleet/edge.pem&tls_key_file=/etc/fleet/edge-key.pem")
//	// Redis Cluster
//	fleetstore.Open("redis+cluster://10.0.0.1:6379?addr=10.0.0.2:6379&addr=10.0.0.3:6379")
//	// several addrs: a cluster too
//	fleetstore.Open("redis://10.0.0.1:6379?addr=10.0.0.2:6379")
//	// Sentinel
//	fleetstore.Open("redis://:PASSWORD@10.0.0.1:26379/0?master_name=mymaster" +
//		"&addr=10.0.0.2:26379&addr=10.0.0.3:26379")
//
// The schemes are redis, rediss (TLS) and redis+cluster. A URL with any
// addr= parameter is a cluster whatever its scheme (rediss with addr= is a
// cluster over TLS), unless it has master_name: then its hosts are
// Sentinels (see Sentinel). User and password go in the URL's userinfo;
// they never appear in an error or a log line.
//
// # URL parameters
//
// Besides the common timeout and key_prefix, the parameters are go-redis's
// own (ParseURL, ParseClusterURL, ParseFailoverURL), with the same names
// and formats, and three TLS files:
//
//	db                  database number (single server, Sentinel; also the URL path /N). Default 0.
//	protocol            2 or 3 (RESP version). Default 3.
//	client_name         CLIENT SETNAME for every connection.
//	dial_timeout        Go duration, at most timeout. Default timeout.
//	read_timeout        Go duration, at most timeout. Default timeout.
//	write_timeout       Go duration, at most timeout. Default timeout.
//	pool_size           connections per server. Default go-redis's (10, cluster 5, per GOMAXPROCS).
//	pool_timeout        Go duration to wait for a free connection, at most timeout. Default timeout.
//	pool_fifo           true: FIFO pool instead of LIFO. Default false.
//	max_idle_conns      idle connections kept per server. Default 0 (no limit).
//	max_active_conns    connections allowed per server. Default 0 (no limit).
//	conn_max_idle_time  Go duration. Default 30m.
//	conn_max_lifetime   Go duration. Default 0 (forever).
//	skip_verify         rediss only (single server, Sentinel): true skips TLS
//	                    certificate checks. Default false.
//	tls_ca_file         rediss only: PEM file of the CAs that verify the servers.
//	                    Default the system's roots.
//	tls_cert_file       rediss only: PEM file of the client certificate, for a server with
//	                    tls-auth-clients yes; needs tls_key_file. Default none.
//	tls_key_file        rediss only: PEM file of that certificate's private key.
//	addr                host:port of another cluster node, or with master_name of
//	                    another Sentinel (repeat it).
//	max_redirects       cluster MOVED/ASK redirects followed per call. Default 3.
//	master_name         the name the Sentinels monitor the master under: the hosts are Sentinels.
//	pipeline            auto, always or off: how Hits share round trips, in rounds
//	                    or through go-redis's auto-pipeliner (see Pipelining).
//	                    Default auto.
//
// pipeline is this driver's own (go-redis has no URL parameter for its
// auto-pipeliner). Neither go-redis nor valkey-go has URL parameters for TLS files (both
// take a *tls.Config), so the names are the Redis server's own
// (tls-ca-cert-file, tls-cert-file, tls-key-file) in snake_case, the same
// in every fleetstore driver. The files are read by Open, once: a missing
// or malformed file is ErrInvalid at Open naming the parameter, not an
// outage at the first call; a renewed certificate takes a new Store. A
// server whose certificate does not verify, or that refuses the client
// certificate, fails every call with ErrUnavailable (fail closed).
//
// go-redis parameters that would break the contract are refused with the
// reason: max_retries, min_retry_backoff and max_retry_backoff (a script
// whose reply was lost must never be re-sent, CONTRACT T5), dialer_retries
// and dialer_retry_timeout (a refused connection must fail within the
// budget, T2), min_idle_conns (Open dials nothing, T3), read_only,
// route_by_latency, route_randomly, replica_only and
// use_disconnected_replicas (the scripts write: masters only), username
// and password (ParseFailoverURL's master credentials: the userinfo holds
// them, a query parameter would show in log lines).
//
// # Sentinel
//
// A URL with master_name is go-redis's failover form (ParseFailoverURL,
// NewFailoverClient): the host and every addr= are Sentinels, asked for
// the master of master_name at the first call and watched for
// +switch-master, so that a failover needs no new Store:
//
//	redis://[[USER]:PASSWORD@]SENTINEL1:26379[/DB]?master_name=NAME[&addr=SENTINEL2:26379...]
//	rediss://…  TLS to the Sentinels and to the master, with the same TLS parameters
//
// Unlike ParseFailoverURL, which gives the userinfo to the Sentinels and
// takes the master's password from password= in the query, the userinfo
// is the master's (as in every other URL of this driver, and as valkey-go
// reads a Sentinel URL). Sentinels that require a password of their own
// are not supported. Over TLS each server is verified under its own
// address (ParseFailoverURL would verify the master under the first
// Sentinel's name): the certificates must name the addresses the
// Sentinels announce. The client settings below hold for the Sentinels'
// connections too, and NewFailoverClient dials nothing (T3).
//
// During a failover (SENTINEL FAILOVER under load, 4 callers, budget
// 100ms, one replica, redis-server 7.0, 4 runs) the Sentinels named the
// new master 1.14–1.21s after the command. 2–4 calls failed, with
// ErrUnavailable: go-redis closes its connections to the old master, the
// calls in flight on them too, when it hears +switch-master; none was
// re-sent (T5) and no call took over 19ms. Calls reached the new master
// 1–2ms after the switch, on the same Store. Claims taken on the old
// master between the replica's promotion and the switch are lost
// (2 342–4 334 of 14 245–23 564 claims in those runs, about 0.8s of
// traffic): replication is asynchronous and the old master keeps
// accepting writes until the clients hear +switch-master.
//
// # TLS connections
//
// Over TLS the driver dials with go-redis's own dialer (NewDialer: its
// TLS, its keep-alive) and hands go-redis's pool the socket under each
// TLS connection, which go-redis cannot see by itself: the pool then
// notices a connection the server closed (a restart) before reusing it,
// as it does over plain TCP, and a restart between two calls stays
// invisible (T5). A pooled TLS connection with bytes waiting on its
// socket is not reused either (go-redis would read them through TLS with
// no deadline).
//
// # Client settings
//
// The driver sets what the contract needs whatever the URL says: context
// deadlines reach the socket (ContextTimeoutEnabled, T1); no client
// retries and one dial attempt (T5, T2); dial, read, write and pool
// timeouts no longer than the budget (T1, T4); no connection is made
// before the first call (T3). A script is run as a function of the
// scripts' library (FCALL), and once more with EVAL only when the server's
// reply proves it did not run: the function missing (after a restart or
// FUNCTION FLUSH; the library is then loaded on every master, in the
// background), or FCALL refused (then every later call is EVALSHA, and
// EVAL on NOSCRIPT).
//
// # Pipelining
//
// With pipeline=auto, the default, concurrent Hits share round trips and
// script calls in the rounds of the Redis-family core (package
// internal/rediscore): Hits, Commits and Releases that arrive while a
// round is in flight go in the next one, one script call per slot, written
// at once on a pooled connection (several in one go-redis pipeline of
// their own). A call that finds no round in flight, and a Peek, goes
// through go-redis's auto-pipeliner (Client.AsyncAutoPipeline,
// ClusterClient.AsyncAutoPipeline; marked experimental by go-redis,
// v9.23.0 here) while another of the Store's calls is in flight there,
// and straight to a pooled connection when alone. The pipeliner runs with
// go-redis's defaults: one stream of batches per client, one batch in
// flight, up to 200 commands a batch, on go-redis's pipeline pool (10
// connections per server, beside and not counted in pool_size and
// max_active_conns; go-redis creates it with pipeline=off too); on a
// cluster, one such stream per range of slots (GOMAXPROCS of them, at
// most 16), each batch split by node. A settle of more claims than a
// round takes is written at once, never queued behind the pipeliner's
// batch in flight, which would delay it by a round trip. Reset and Ping
// are never pipelined. pipeline=always sends every Hit and Peek, and
// every settle alone, through the pipeliner, Hits never in a round (one
// alone then pays the pipeliner's hand-offs between goroutines: about 40–90µs
// more p50 at concurrency 1 on the 2-core machine of the README's
// figures); pipeline=off sends each Hit and Peek alone on a pooled
// connection. Commits and Releases go in rounds whatever pipeline says.
//
// What the contract needs, and how it holds on that path (each shown by a
// test with pipeline=always, the conformance suite included, on a single
// server, a cluster and a Sentinel-managed master):
//
//   - Deadlines (T1): go-redis runs a batch on a context of its own, not
//     the callers'. A Hit waits for its batch or for its own context,
//     whichever comes first, so it returns by its deadline; the batch
//     itself is bounded by the read and write timeouts (at most the
//     budget). A Hit whose caller has returned before its batch is
//     written is not written (a go-redis hook of this driver drops it),
//     so a Hit queued behind a batch the server does not answer does not
//     run later, once its caller has been told ErrTimeout. The dropped
//     Hit's error counts as a per-command outcome, so it never fails the
//     live Hits of its batch (go-redis writes a batch over 128 KiB in
//     chunks and fails the later chunks unsent after a transport error).
//     One window remains: the hook runs before go-redis takes a
//     connection for the batch, and taking one may mean a dial and its
//     handshake (and on a cluster a slot-map load), on go-redis's own
//     context, bounded by the dial and read timeouts (each at most the
//     budget). A Hit whose caller's deadline passes in that window is
//     told ErrTimeout and may still run, once (T5 holds), up to about
//     twice the budget after the call began; with the degraded mode on, a
//     Hit that then decided locally was also charged in the shared store.
//     pipeline=off has no such window.
//   - No re-send (T5): the pipeliner retries a failed batch as a whole up
//     to MaxRetries, which the driver forces to none, and skips the
//     retry of a batch holding a command marked NoRetry, which every
//     script call is. The full-duplex mode, whose recovery may replay a
//     command the server ran, is not used.
//   - A missing function: a batch's "Function not found" (or NOSCRIPT)
//     reply is that Hit's own error; the driver sends that Hit again with
//     EVAL, as on the plain path.
//   - Cluster: go-redis routes each command of a batch to its slot's
//     master and follows MOVED and ASK as for a plain pipeline.
//   - Close (T4): the Store's Close closes the client, which stops the
//     pipeliner's goroutines after its last batch (bounded by the read
//     timeout).
//
// make compare measures it (rows fleetstore-redis-hit and
// fleetstore-redis-hit-unpipelined; bench/README.md): under load the
// pipeliner serves more Hits per second at a lower p99 and less server
// CPU per Hit; alone, the same p50.
// A Store opened with FromClient on the application's own client (see
// Your own client) is not pipelined: the driver adds neither the
// pipeliner nor its hook to a client it does not own.
//
// # Your own client
//
// FromClient opens a Store on a go-redis client the application built
// (its hooks, credentials provider and TLS kept), with a URL of common
// parameters only; instead of setting what the contract needs it checks
// the client's settings and refuses one that would break it, naming the
// setting. Dialer gives such a client the driver's connection defences.
//
// # Keys and scripts
//
// The key layout and the Lua scripts are package internal/scripts, and the
// driver logic around them package internal/rediscore, both shared with
// the Valkey driver; this package holds the URL options, the client
// construction and a small go-redis adapter. A few small hashes (shards)
// per tenant hold its claims, the first of them also every kind's TAT and
// calendar-quota count, every key of a tenant under one cluster hash tag,
// each expiring with its latest record (internal/scripts' doc). A Hit
// alone is one script call. Hits, and Commits and Releases of up to 16
// claims, go in rounds (group commit, internal/rediscore): a call that
// finds no round in flight is sent at once, alone; the calls that arrive
// meanwhile go together in the next round, one script call on a single
// server, and one per tenant in one pipeline (one round trip per node) on
// a cluster. With pipeline=always or off, and on a client of your own
// (FromClient), Hits never go in a round. A larger settle is sent at
// once, beside the rounds. Each claim
// gets its own result, each call returns by its own deadline (T1), and
// nothing is sent twice (T5). A Peek (driver.Peeker) is one call of a
// read-only script; Reset is one call of a script that deletes the TATs
// and quota counts.
//
// # Logging
//
// The Store logs an outage once (one warning when the store becomes
// unreachable, one info line when it answers again and a second has
// passed with no call unanswered), for every driver.
// This driver adds a warning per server when its settings can lose claims
// — a maxmemory-policy that can evict keys (an evicted claim lets a
// duplicate through), appendonly off (a crash loses what was committed
// since the last snapshot) — read once, in the background, after the
// first answered call.
//
// go-redis itself would write a line to stderr for each failed dial
// ("failed to dial after 1 attempts", 20 in a one-second outage at 10
// calls): its logger is one per process (goredis.SetLogger), with no
// logger per client, and the line is logged on a context of go-redis's
// own, so neither WithLogger nor the call's context can reach it. The
// driver's clients never make it print that line: their dialer hands
// go-redis a failed dial as a connection whose first write fails with the
// dial's error, so the call fails as before (same error, same time) and
// go-redis logs nothing; the Store logs the outage once. The driver never
// calls goredis.SetLogger: setting a process-wide logger from a library
// would undo the choice of the application or of another library that
// uses go-redis, and whichever set it last would win. On a Sentinel URL
// go-redis still logs through that logger, to stderr unless the
// application installs ZapLogger (or a logger of its own): the Sentinels'
// master discovery ("sentinel: GetMasterAddrByName … failed", "sentinel:
// selected addr", "sentinel: new master") and the pool's "failed to dial
// … all sentinels specified in configuration are unreachable" — per call
// while the Sentinels are unreachable (20 lines in 10 calls against a
// refused Sentinel: TestOutageDoesNotPrint). Install it once, at start:
//
//	goredis.SetLogger(redis.ZapLogger(logger))
//
// A client brought with FromClient logs as its owner set go-redis up.
package redis

import (
	"context"
	"fmt"
	"net"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/internal/rediscore"
	"github.com/fleetstore/fleetstore/internal/replyguard"
)

func init() {
	for _, scheme := range []string{"redis", "rediss", "redis+cluster"} {
		fleetstore.Register(scheme, Driver{})
	}
}

// Driver opens Redis stores. It is registered as "redis", "rediss" and
// "redis+cluster".
type Driver struct{}

var (
	_ driver.Driver            = Driver{}
	_ driver.ExpiryGranularity = Driver{}
)

// ExpiryGranularity implements driver.ExpiryGranularity: a key may linger
// up to 2ms past its expiry. Every expiry is a millisecond on the server's
// clock, rounded up (PXAT, PEXPIREAT), and Redis drops a key once its
// clock is past that millisecond.
func (Driver) ExpiryGranularity() time.Duration { return 2 * time.Millisecond }

// Open implements driver.Driver: it parses the URL and builds the client,
// without any network I/O (T3).
func (Driver) Open(cfg driver.Config) (driver.Conn, error) {
	c, err := open(cfg, nil)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// dialFunc dials a server: net.Dialer.DialContext's shape.
type dialFunc = func(ctx context.Context, network, addr string) (net.Conn, error)

// open is Open with go-redis's dialer replaced by dial when not nil (the
// tests lose replies on purpose with it).
//
// The dialer is go-redis's own (goredis.NewDialer: its TLS, its
// keep-alive), each connection made checkable by go-redis's pool over TLS
// (see checkable), and guarded (package replyguard).
func open(cfg driver.Config, dial dialFunc) (*rediscore.Conn, error) {
	o, err := parseURL(cfg)
	if err != nil {
		return nil, err
	}
	// Every connection is guarded: a reply that declares more than any of
	// ours can hold fails the connection before go-redis allocates it (V4).
	if dial == nil {
		dial = goRedisDialer(o)
	}
	dial = quiet(replyguard.RESP(dial))
	switch {
	case o.single != nil:
		o.single.Dialer = dial
	case o.failover != nil:
		o.failover.Dialer = dial // the Sentinels' connections and the master's
	default:
		o.cluster.Dialer = dial
	}
	cl := &client{}
	var async func() (*goredis.AutoPipeliner, error)
	switch {
	case o.cluster != nil:
		cc := goredis.NewClusterClient(o.cluster)
		cl.c, cl.cluster, async = cc, true, cc.AsyncAutoPipeline
	case o.failover != nil:
		// No I/O either: the Sentinels are asked for the master at the
		// first dial (T3).
		fc := goredis.NewFailoverClient(o.failover)
		cl.c, async = fc, fc.AsyncAutoPipeline
	default:
		sc := goredis.NewClient(o.single)
		cl.c, async = sc, sc.AsyncAutoPipeline
	}
	cl.c.AddHook(leftBehind{})
	if o.pipeline != "off" {
		// No I/O: it starts its flusher goroutine, which the client's
		// Close stops (T4). go-redis's defaults: one ordered stream of
		// batches, one batch in flight, up to 200 commands a batch.
		ap, err := async()
		if err != nil {
			_ = cl.c.Close()
			return nil, fmt.Errorf("redis: auto-pipeliner: %w", err)
		}
		cl.ap, cl.always = ap, o.pipeline == "always"
	}
	return rediscore.New(cl, cfg, o.display), nil
}

// goRedisDialer is what go-redis dials o's connections with when given
// no Dialer (NewDialer: its TLS, its keep-alive), each connection made
// checkable by go-redis's pool.
func goRedisDialer(o *options) dialFunc {
	var base *goredis.Options
	switch {
	case o.single != nil:
		base = o.single // NewDialer reads the options at each dial
	case o.cluster != nil:
		base = &goredis.Options{DialTimeout: o.cluster.DialTimeout, TLSConfig: o.cluster.TLSConfig}
	default:
		base = &goredis.Options{DialTimeout: o.failover.DialTimeout, TLSConfig: o.failover.TLSConfig}
	}
	return checkableDialer(base)
}

// checkableDialer is goredis.NewDialer(base), each connection made
// checkable by go-redis's pool.
func checkableDialer(base *goredis.Options) dialFunc {
	dial := goredis.NewDialer(base)
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return checkable(c), nil
	}
}
