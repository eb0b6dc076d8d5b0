// Package valkey is the Valkey driver of fleetstore (valkey-go): one Lua
// script call per Hit, on the server's clock, on a single server, a
// cluster or a Sentinel-managed master, with valkey-go's auto-pipelining
// (concurrent calls share a connection). It also speaks to Redis 7, which
// has the same protocol. Blank-import it and open a URL:
//
//	import _ "github.com/fleetstore/fleetstore/drivers/valkey"
//
//	fleetstore.Open("valkey://cache:6379/0?timeout=50ms")
//	// TLS
//	fleetstore.Open("valkeys://:PASSWORD@cache.example.com:6380/0")
//	// TLS: own CA, client certificate
//	fleetstore.Open("valkeys://cache.example.com:6380/0?tls_ca_file=/etc/fleet/ca.pem" +
//		"&tls_cert_file=/etc/fleet/edge.pem&tls_key_file=/etc/fleet/edge-key.pem")
//	// cluster
//	fleetstore.Open("valkey://10.0.0.1:6379?addr=10.0.0.2:6379&addr=10.0.0.3:6379")
//	// Sentinel
//	fleetstore.Open("valkey://:PASSWORD@10.0.0.1:26379/0?master_set=mymaster" +
//		"&addr=10.0.0.2:26379&addr=10.0.0.3:26379")
//
// The schemes are valkey and valkeys (TLS). A URL with master_set is a
// Sentinel-managed master (see Sentinel); otherwise a URL with any addr=
// parameter is a cluster, and a URL with one address is a single server
// or, when that server is a cluster node (CLUSTER SLOTS answers), the
// whole cluster (valkey-go decides when it connects). User and password
// go in the URL's userinfo; they never appear in an error or a log line.
//
// # URL parameters
//
// Besides the common timeout and key_prefix, the parameters are those of
// valkey-go's ParseURL, with the same names, and three TLS files:
//
//	db             database number (single server, Sentinel; also the URL path /N). Default 0.
//	protocol       2 or 3 (RESP version). Default 3, falling back to 2 on old servers.
//	client_name    CLIENT SETNAME for every connection.
//	dial_timeout   Go duration, at most timeout: dial and handshake. Default timeout.
//	write_timeout  Go duration, at most timeout: a connection that stops answering
//	               is closed after about this plus the 1s keep-alive gap. Default timeout.
//	skip_verify    valkeys only: true (or empty) skips TLS certificate checks.
//	               Default false.
//	tls_ca_file    valkeys only: PEM file of the CAs that verify the servers.
//	               Default the system's roots.
//	tls_cert_file  valkeys only: PEM file of the client certificate, for a server with
//	               tls-auth-clients yes; needs tls_key_file. Default none.
//	tls_key_file   valkeys only: PEM file of that certificate's private key.
//	addr           host:port of another cluster node, or with master_set of another
//	               Sentinel (repeat it).
//	master_set     the name the Sentinels monitor the master under: the hosts are Sentinels.
//	client_cache   only 0: client-side caching is always off.
//	max_retries    only 0: the driver never retries.
//
// An unknown parameter is an error (valkey-go itself ignores them).
// valkey-go's ParseURL has no parameters for TLS files (it takes a
// *tls.Config), so the names are the server's own (tls-ca-cert-file,
// tls-cert-file, tls-key-file) in snake_case, the same in every fleetstore
// driver. The files are read by Open, once: a missing or malformed file is
// ErrInvalid at Open naming the parameter, not an outage at the first
// call; a renewed certificate takes a new Store. A server whose
// certificate does not verify, or that refuses the client certificate,
// fails every call with ErrUnavailable (fail closed).
//
// # Sentinel
//
// A URL with master_set is valkey-go's Sentinel form: the host and every
// addr= are Sentinels, asked for the master of master_set when the client
// is built (at the first call, see Lazy start) and watched for
// +switch-master, so that a failover needs no new Store:
//
//	valkey://[[USER]:PASSWORD@]SENTINEL1:26379[/DB]?master_set=NAME[&addr=SENTINEL2:26379...]
//	valkeys://…  TLS to the Sentinels and to the master, with the same TLS parameters
//
// The userinfo is the master's, as valkey-go reads it; Sentinels that
// require a password of their own are not supported. valkey-go's ParseURL
// leaves the Sentinels' connections plain and would verify the master
// under the first Sentinel's name; under valkeys:// the driver speaks TLS
// to the Sentinels too (as go-redis does) and verifies each server under
// its own address: the certificates must name the addresses the Sentinels
// announce. The client settings below hold for the Sentinels' own dialer
// too (a Sentinel that never answers costs one dial timeout, then the
// next is asked).
//
// During a failover (SENTINEL FAILOVER under load, 4 callers, budget
// 100ms, one replica, valkey-server 8.0, 4 runs) the Sentinels named the
// new master 1.13–1.21s after the command; no call failed and none took
// over 18ms, and calls reached the new master 0–1ms after the switch, on
// the same Store. Claims taken on the old master between the replica's
// promotion and the switch are lost (3 637–3 882 of 18 636–21 053 claims
// in those runs, about 0.8s of traffic): replication is asynchronous and
// the old master keeps accepting writes until the clients hear
// +switch-master.
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
// longer than the budget (T1, T4). A script is run as a function of the
// scripts' library (FCALL), and once more with EVAL only when the server's
// reply proves it did not run: the function missing (after a restart or
// FUNCTION FLUSH; the library is then loaded on every node, in the
// background), or FCALL refused (then every later call is EVALSHA, and
// EVAL on NOSCRIPT).
//
// # Your own client
//
// FromOption opens a Store on a client built from the application's
// valkey.ClientOption by its own builder (valkeyotel.NewClient, a hook),
// with a URL of common parameters only; instead of setting what the
// contract needs it checks the option and refuses one that would break
// it, naming the setting.
//
// # Keys and scripts
//
// The key layout and the Lua scripts are package internal/scripts, and the
// driver logic around them package internal/rediscore, both shared with
// the Redis driver; this package holds the URL options, the lazy client
// and a small valkey-go adapter. A few small hashes (shards) per tenant
// hold its claims, the first of them also every kind's TAT and
// calendar-quota count, every key of a tenant under one cluster hash tag
// (internal/scripts' doc). A Hit alone is one script call on one slot.
// Hits, and Commits and Releases of up to 16 claims, go in rounds (group
// commit, internal/rediscore): a call that finds no round in flight is
// sent at once, alone; the calls that arrive meanwhile go together in the
// next round, one script call on a single server or a Sentinel-managed
// master, and one per tenant (one slot each) on a cluster, all in one
// pipeline (one round trip per node); until the client is built, per
// tenant too (the server may turn out to be a cluster node). A larger
// settle is sent at once, beside the rounds. Each claim gets its own result, each call returns by
// its own deadline (T1), and nothing is sent twice (T5). A Peek
// (driver.Peeker) is one call of a read-only script; Reset is one call of
// a script that deletes the TATs and quota counts.
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
// up to 2ms past its expiry. Every expiry is a millisecond on the server's
// clock, rounded up (PXAT, PEXPIREAT), and Valkey drops a key once its
// clock is past that millisecond.
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
