package valkey

import (
	"strconv"
	"strings"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/internal/redisurl"
	"github.com/fleetstore/fleetstore/internal/tlsfiles"
)

// options is what Open derives from the URL.
type options struct {
	client  valkey.ClientOption
	display string // the URL with its password redacted, for log lines
}

// The valkey-go URL parameters the driver accepts (valkey.ParseURL's
// names; see the package doc).
var (
	commonParams = append([]string{"protocol", "client_name", "dial_timeout",
		"write_timeout", "client_cache", "max_retries", "skip_verify"}, tlsfiles.Params...)
	urlSpec = redisurl.Spec{
		TLSScheme: "valkeys", Master: "master_set",
		Single:   append([]string{"db"}, commonParams...),
		Cluster:  append([]string{"addr"}, commonParams...),
		Sentinel: append([]string{"master_set", "addr", "db"}, commonParams...),
		Timeouts: []string{"dial_timeout", "write_timeout"},
	}
)

// parseURL turns cfg into valkey-go options with the settings the contract
// needs forced (see forceContract). Errors wrap ErrInvalid, name the
// parameter and never quote the URL's userinfo.
func parseURL(cfg driver.Config) (*options, error) {
	u, err := urlSpec.Check(cfg)
	if err != nil {
		return nil, err
	}
	q := u.Query
	// valkey-go reads these as "anything but 0 means on"; the contract
	// needs them off, so the only value worth writing is 0.
	if v := q.Get("client_cache"); q.Has("client_cache") && v != "0" {
		return nil, driver.Invalid("url: client_cache", "client-side caching is always off "+
			"(it needs CLIENT TRACKING, which many hosted servers lack); "+
			"only 0 is accepted, got "+driver.Quote(v))
	}
	if v := q.Get("max_retries"); q.Has("max_retries") && v != "0" {
		return nil, driver.Invalid("url: max_retries", "the driver never re-sends a call "+
			"whose reply was lost (CONTRACT T5); only 0 is accepted, got "+driver.Quote(v))
	}
	if v := q.Get("protocol"); q.Has("protocol") && v != "2" && v != "3" {
		return nil, driver.Invalid("url: protocol", "want 2 or 3, got "+driver.Quote(v))
	}
	if q.Has("db") {
		if _, err := strconv.Atoi(q.Get("db")); err != nil {
			return nil, driver.Invalid("url: db", "want a database number, got "+driver.Quote(q.Get("db")))
		}
	}
	q.Del("client_cache")
	q.Del("max_retries")
	// valkey.ParseURL reads "/" as database "" and fails: drop it.
	u.URL.Path, u.URL.RawPath = strings.TrimSuffix(u.URL.Path, "/"), ""
	co, err := valkey.ParseURL(u.String())
	if err != nil {
		return nil, invalidURL(err)
	}
	if err := u.TLS(co.TLSConfig); err != nil {
		return nil, err
	}
	if u.Form == redisurl.Sentinel && co.TLSConfig != nil {
		// Under valkeys:// the Sentinels' own connections are TLS too,
		// with the same CA and client certificate (as go-redis does):
		// valkey-go's ParseURL leaves them plain (Sentinel.TLSConfig).
		co.Sentinel.TLSConfig = co.TLSConfig.Clone()
	}
	forceContract(&co, u.Timeouts["dial_timeout"], u.Timeouts["write_timeout"])
	return &options{client: co, display: cfg.URL.Redacted()}, nil
}

// forceContract sets what the contract needs, whatever the URL says. Each
// setting has a test that fails without it (settings_test.go).
func forceContract(co *valkey.ClientOption, dial, write time.Duration) {
	// No client-side cache: it needs CLIENT TRACKING, which many hosted
	// servers refuse (every connection would fail), and the scripts' replies
	// are never cacheable anyway.
	co.DisableCache = true
	// Never re-send a command whose reply was lost: a script may have run
	// (T5). valkey-go retries only read-only commands, but a retried PING
	// would wait out the budget on a refused server instead of failing at
	// once (T2).
	co.DisableRetry = true
	// A dial and the connection handshake (HELLO, SELECT) end within the
	// budget (T1, T4): the default is 5s. The Sentinels' connections have
	// a dialer of their own.
	co.Dialer.Timeout = dial
	co.Sentinel.Dialer.Timeout = dial
	// A connection that stops answering is closed after about the budget
	// (plus the keep-alive gap) rather than the default 10s (T4); it also
	// bounds the cluster's slot-map refresh, which runs without a context.
	co.ConnWriteTimeout = write
	if co.Dialer.KeepAlive == 0 {
		co.Dialer.KeepAlive = valkey.DefaultTCPKeepAlive
	}
	if co.Sentinel.Dialer.KeepAlive == 0 {
		co.Sentinel.Dialer.KeepAlive = valkey.DefaultTCPKeepAlive
	}
	// Every connection has its reader running, also between calls, so a
	// connection the server closed (a restart) is noticed and replaced
	// before the next call is written to it. Without it an idle connection
	// is only read during a call: the first call after a restart would be
	// sent on the dead connection and fail, and re-sending it is not safe
	// in general (T5: it may have run).
	co.AlwaysPipelining = true
	co.DisableAutoPipelining = false
	// One connection per server, which auto-pipelining shares between all
	// concurrent calls (valkey-go's default for a single server is up to
	// four, picked by key slot). Calls then never wait on the dial and
	// handshake of a second connection after the first has answered, and a
	// fleet of nodes holds one connection each per server.
	co.PipelineMultiplex = -1
	// The scripts write: masters only.
	co.ReplicaOnly = false
	co.SendToReplicas = nil
	// A single address may still be a cluster node: valkey-go finds out
	// with CLUSTER SLOTS when the client is built (ForceSingleClient false).
	// Several addresses are always a cluster, or the Sentinels of
	// Sentinel.MasterSet.
	co.ForceSingleClient = false
}

// invalidURL wraps a valkey.ParseURL error. Those quote a parameter's
// value or the path, never the userinfo.
func invalidURL(err error) error {
	return driver.Invalid("url", strings.TrimPrefix(err.Error(), "valkey: "))
}
