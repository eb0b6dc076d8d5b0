// Package valkey is the Valkey driver of fleetstore (valkey-go): one Lua
// script call per Hit, on the server's clock, on a single server or a
// cluster, with valkey-go's auto-pipelining (concurrent calls share a
// connection). It also speaks to Redis 7, which has the same protocol.
// Blank-import it and open a URL:
//
//	import _ "github.com/fleetstore/fleetstore/drivers/valkey"
//
//	fleetstore.Open("valkey://cache:6379/0?timeout=50ms")
//	fleetstore.Open("valkeys://:PASSWORD@cache.example.com:6380/0")                    // TLS
//	fleetstore.Open("valkey://10.0.0.1:6379?addr=10.0.0.2:6379&addr=10.0.0.3:6379")   // cluster
//
// The schemes are valkey and valkeys (TLS). A URL with any addr= parameter
// is a cluster; a URL with one address is a single server or, when that
// server is a cluster node (CLUSTER SLOTS answers), the whole cluster
// (valkey-go decides when it connects). User and password go in the URL's
// userinfo; they never appear in an error or a log line.
//
// # URL parameters
//
// Besides the common timeout and key_prefix, the parameters are those of
// valkey-go's ParseURL, with the same names:
//
//	db             database number (single server; also the URL path /N). Default 0.
//	protocol       2 or 3 (RESP version). Default 3, falling back to 2 on old servers.
//	client_name    CLIENT SETNAME for every connection.
//	dial_timeout   Go duration, at most timeout: dial and handshake. Default timeout.
//	write_timeout  Go duration, at most timeout: a connection that stops answering
//	               is closed after about this plus the 1s keep-alive gap. Default timeout.
//	skip_verify    valkeys only: true (or empty) skips TLS certificate checks. Default false.
//	addr           host:port of another cluster node (repeat it).
//	client_cache   only 0: client-side caching is always off.
//	max_retries    only 0: the driver never retries.
//
// An unknown parameter is an error (valkey-go itself ignores them), as is
// master_set (Sentinel is not supported).
//
// # Lazy start
//
// valkey-go connects inside NewClient and fails when the server is down;
// Open does no I/O (CONTRACT T3). The client is built on the first call,
// in the background, once for all callers (single flight): each caller
// waits for the build or its own deadline, whichever is first. A failed
// build is retried by the first call after a backoff (50ms, doubling to
// 1s); calls before that fail at once with its error. Once built, the
// client is kept for the Store's life and reconnects on its own.
//
// # Client settings
//
// The driver sets what the contract needs whatever the URL says:
// client-side caching off (it needs CLIENT TRACKING, which many hosted
// servers refuse); retries off (T5: a script whose reply was lost is never
// re-sent; a refused call fails at once, T2); the call's deadline reaches
// every command (T1); dial, handshake and stalled-connection timeouts no
// longer than the budget (T1, T4). A script is run with EVALSHA, and once
// more with EVAL only when the server answers NOSCRIPT (after a restart or
// SCRIPT FLUSH): that reply proves it did not run.
//
// # Keys and scripts
//
// The key layout and the Lua scripts are package internal/scripts, and the
// driver logic around them package internal/rediscore, both shared with
// the Redis driver; this package holds the URL options, the lazy client
// and a small valkey-go adapter. One hash per tenant holds every kind's
// TAT, one string per claim, every key of a tenant under one cluster hash
// tag. A Hit is one script call on one slot; a Commit or Release is one
// script call per tenant, all in one pipeline (one round trip per node).
// Reset is one DEL.
//
// # Logging
//
// The Store logs an outage once (one warning when the store becomes
// unreachable, one info line when it answers again and a second has
// passed with no call unanswered), for every driver.
// This driver adds a warning when a server's maxmemory-policy can evict
// keys (an evicted claim lets a duplicate through): checked once per node,
// in the background, after the first answered call.
package valkey

import (
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/internal/rediscore"
)

func init() {
	for _, scheme := range []string{"valkey", "valkeys"} {
		fleetstore.Register(scheme, Driver{})
	}
}

// Driver opens Valkey stores. It is registered as "valkey" and "valkeys".
type Driver struct{}

var (
	_ driver.Driver            = Driver{}
	_ driver.ExpiryGranularity = Driver{}
)

// ExpiryGranularity implements driver.ExpiryGranularity: a key may linger
// up to 2ms past its expiry. Every PX is the time left rounded up to whole
// ms, plus 1ms, against Valkey's millisecond clock (CONTRACT §7).
func (Driver) ExpiryGranularity() time.Duration { return 2 * time.Millisecond }

// Open implements driver.Driver: it parses the URL and prepares the
// client, without any network I/O (T3): the client connects on the first
// call.
func (Driver) Open(cfg driver.Config) (driver.Conn, error) {
	o, err := parseURL(cfg)
	if err != nil {
		return nil, err
	}
	return newConn(cfg, o), nil
}

// newConn returns the core Conn over a lazily built valkey-go client.
func newConn(cfg driver.Config, o *options) *rediscore.Conn {
	return rediscore.New(&client{lazy: newLazyClient(o.client)}, cfg, o.display)
}
