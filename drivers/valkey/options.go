package valkey

import (
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/internal/rediscore"
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
	singleParams   = append([]string{"db"}, commonParams...)
	clusterParams  = append([]string{"addr"}, commonParams...)
	sentinelParams = append([]string{"master_set", "addr", "db"}, commonParams...)
)

// parseURL turns cfg into valkey-go options with the settings the contract
// needs forced (see forceContract). Errors wrap ErrInvalid, name the
// parameter and never quote the URL's userinfo.
func parseURL(cfg driver.Config) (*options, error) {
	u := *cfg.URL
	q := u.Query()
	sentinel := q.Has("master_set")
	cluster := !sentinel && len(q["addr"]) > 0
	accepted, form := singleParams, "one-server"
	switch {
	case sentinel:
		accepted, form = sentinelParams, "Sentinel"
	case cluster:
		accepted, form = clusterParams, "cluster"
	}
	err := rediscore.CheckParams(q, form, accepted, singleParams, clusterParams, sentinelParams)
	if err != nil {
		return nil, err
	}
	if err := driver.CheckAddrs(u.Host, q["addr"]); err != nil {
		return nil, err
	}
	if u.Opaque != "" || u.Host == "" {
		return nil, driver.Invalid("url", "want "+u.Scheme+"://[[USER]:PASSWORD@]HOST:PORT[/DB]")
	}
	if u.Scheme != "valkeys" {
		if name := tlsfiles.Given(q); name != "" || q.Has("skip_verify") {
			if name == "" {
				name = "skip_verify"
			}
			return nil, driver.Invalid("url: "+name, "only for valkeys:// (TLS)")
		}
	}
	if sentinel && q.Get("master_set") == "" {
		return nil, driver.Invalid("url: master_set",
			"empty: want the name Sentinel monitors the master under")
	}
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
	limits, err := driver.Timeouts(q, cfg.Timeout, "dial_timeout", "write_timeout")
	if err != nil {
		return nil, err
	}

	// valkey.ParseURL reads "/" as database "" and fails: drop it.
	path := strings.TrimSuffix(u.Path, "/")
	if cluster {
		if db := strings.TrimPrefix(path, "/"); db != "" && db != "0" {
			return nil, driver.Invalid("url: path",
				"a cluster has only database 0, got "+driver.Quote(u.Path))
		}
		path = ""
	}
	if q.Has("db") {
		if _, err := strconv.Atoi(q.Get("db")); err != nil {
			return nil, driver.Invalid("url: db", "want a database number, got "+driver.Quote(q.Get("db")))
		}
	}
	files := url.Values{}
	for _, name := range tlsfiles.Params {
		if vs, ok := q[name]; ok {
			files[name] = vs
		}
	}
	parsed := u
	parsed.Path, parsed.RawPath = path, ""
	own := []string{"client_cache", "max_retries", "dial_timeout", "write_timeout"}
	for _, name := range append(own, tlsfiles.Params...) {
		q.Del(name)
	}
	parsed.RawQuery = q.Encode()
	co, err := valkey.ParseURL(parsed.String())
	if err != nil {
		return nil, invalidURL(err)
	}
	if co.TLSConfig != nil {
		if err := tlsfiles.Apply(co.TLSConfig, files); err != nil {
			return nil, err
		}
	}
	if sentinel {
		sentinelTLS(&co)
	}
	forceContract(&co, limits["dial_timeout"], limits["write_timeout"])
	return &options{client: co, display: cfg.URL.Redacted()}, nil
}

// sentinelTLS sets the TLS of a Sentinel URL: valkey-go's ParseURL names
// the first Sentinel as the server of the master's TLS connections and
// leaves the Sentinels' own connections plain (Sentinel.TLSConfig).
// Under valkeys:// both are TLS, with the same CA and client certificate
// (as go-redis does), each server verified under its own address.
func sentinelTLS(co *valkey.ClientOption) {
	if co.TLSConfig == nil {
		return
	}
	co.TLSConfig.ServerName = ""
	co.Sentinel.TLSConfig = co.TLSConfig.Clone()
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
