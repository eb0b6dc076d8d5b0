package redis

import (
	"net/url"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/internal/rediscore"
	"github.com/fleetstore/fleetstore/internal/tlsfiles"
)

// options is what Open derives from the URL: exactly one of single,
// cluster and failover is set.
type options struct {
	single   *goredis.Options
	cluster  *goredis.ClusterOptions
	failover *goredis.FailoverOptions // a Sentinel-managed master
	display  string                   // the URL with its password redacted, for log lines
	pipeline string                   // pipeline=: auto, always or off
}

// The go-redis URL parameters the driver accepts (see the package doc),
// and the TLS files of package tlsfiles.
var (
	commonParams = append([]string{
		"protocol", "client_name", "dial_timeout", "read_timeout", "write_timeout",
		"pool_size", "pool_timeout", "pool_fifo", "max_idle_conns", "max_active_conns",
		"conn_max_idle_time", "conn_max_lifetime", "pipeline",
	}, tlsfiles.Params...)
	singleParams   = append([]string{"db", "skip_verify"}, commonParams...)
	clusterParams  = append([]string{"addr", "max_redirects"}, commonParams...)
	failoverParams = append([]string{"master_name", "addr", "db", "skip_verify"}, commonParams...)
)

// Reasons of refused that its lines cannot hold.
const (
	neverResent   = "the driver never re-sends a script whose reply was lost (CONTRACT T5)"
	notRedacted   = "a query parameter is not redacted from log lines"
	userInURL     = "give the user in the URL's userinfo (redis://USER:PASSWORD@HOST…): "
	passwordInURL = "give the password in the URL's userinfo (redis://:PASSWORD@HOST…): "
)

// refused names the go-redis parameters that would break the contract.
var refused = map[string]string{
	"max_retries":                neverResent,
	"min_retry_backoff":          "the driver never retries (CONTRACT T5)",
	"max_retry_backoff":          "the driver never retries (CONTRACT T5)",
	"dialer_retries":             "a refused connection fails at once (CONTRACT T2)",
	"dialer_retry_timeout":       "a refused connection fails at once (CONTRACT T2)",
	"min_idle_conns":             "Open dials nothing (CONTRACT T3)",
	"read_only":                  "the scripts write: they run on masters",
	"route_by_latency":           "the scripts write: they run on masters",
	"route_by_latency_tolerance": "the scripts write: they run on masters",
	"route_randomly":             "the scripts write: they run on masters",
	"replica_only":               "the scripts write: they run on masters",
	"use_disconnected_replicas":  "the scripts write: they run on masters",
	"username":                   userInURL + notRedacted,
	"password":                   passwordInURL + notRedacted,
}

// parseURL turns cfg into go-redis options, with the settings the
// contract needs forced. Errors wrap ErrInvalid, name the parameter and
// never quote the URL.
func parseURL(cfg driver.Config) (*options, error) {
	u := *cfg.URL
	q := u.Query()
	if err := driver.RefuseParams(q, refused); err != nil {
		return nil, err
	}
	isFailover := q.Has("master_name")
	isCluster := !isFailover && (u.Scheme == "redis+cluster" || len(q["addr"]) > 0)
	accepted, form := singleParams, "one-server"
	switch {
	case isFailover && u.Scheme == "redis+cluster":
		return nil, driver.Invalid("url: master_name",
			"a Sentinel-managed master is a redis:// or rediss:// URL, not redis+cluster://")
	case isFailover:
		accepted, form = failoverParams, "Sentinel"
	case isCluster:
		accepted, form = clusterParams, "cluster"
	}
	err := rediscore.CheckParams(q, form, accepted, singleParams, clusterParams, failoverParams)
	if err != nil {
		return nil, err
	}
	if err := driver.CheckAddrs(u.Host, q["addr"]); err != nil {
		return nil, err
	}
	if u.Scheme != "rediss" {
		if name := tlsfiles.Given(q); name != "" || q.Has("skip_verify") {
			if name == "" {
				name = "skip_verify"
			}
			return nil, driver.Invalid("url: "+name, "only for rediss:// (TLS)")
		}
	}
	if u.Opaque != "" || u.Host == "" {
		return nil, driver.Invalid("url", "want "+u.Scheme+"://[[USER]:PASSWORD@]HOST:PORT[/DB]")
	}
	if isFailover && q.Get("master_name") == "" {
		return nil, driver.Invalid("url: master_name",
			"empty: want the name Sentinel monitors the master under")
	}
	timeouts, err := driver.Timeouts(q, cfg.Timeout,
		"dial_timeout", "read_timeout", "write_timeout", "pool_timeout")
	if err != nil {
		return nil, err
	}
	pipeline := q.Get("pipeline")
	switch pipeline {
	case "":
		pipeline = "auto"
	case "auto", "always", "off":
	default:
		return nil, driver.Invalid("url: pipeline",
			"want auto, always or off, got "+driver.Quote(pipeline))
	}
	q.Del("pipeline") // ours, not go-redis's
	files := url.Values{}
	for _, name := range tlsfiles.Params {
		if vs, ok := q[name]; ok {
			files[name] = vs
		}
	}
	tlsfiles.Del(q)
	for name := range timeouts {
		q.Del(name) // go-redis would also accept plain seconds and -1
	}

	parsed := u
	if parsed.Scheme == "redis+cluster" {
		parsed.Scheme = "redis"
	}
	parsed.RawQuery = q.Encode()
	o := &options{display: cfg.URL.Redacted(), pipeline: pipeline}
	switch {
	case isFailover:
		fo, err := goredis.ParseFailoverURL(parsed.String())
		if err != nil {
			return nil, invalidURL(err)
		}
		// The userinfo is the master's, as in every other URL of this
		// driver (and as valkey-go reads a Sentinel URL): go-redis's
		// ParseFailoverURL gives it to the Sentinels and takes the
		// master's from password= in the query, which log lines would
		// show.
		fo.Username, fo.Password = fo.SentinelUsername, fo.SentinelPassword
		fo.SentinelUsername, fo.SentinelPassword = "", ""
		if fo.TLSConfig != nil {
			// ParseFailoverURL names the first Sentinel as the server of
			// every TLS connection, the master's too: verify each server
			// under its own address instead.
			fo.TLSConfig.ServerName = ""
			if err := tlsfiles.Apply(fo.TLSConfig, files); err != nil {
				return nil, err
			}
		}
		contract{&fo.ContextTimeoutEnabled, &fo.MaxRetries, &fo.DialerRetries, &fo.MinIdleConns,
			&fo.DialTimeout, &fo.ReadTimeout, &fo.WriteTimeout, &fo.PoolTimeout, nil}.force(timeouts)
		// NewFailoverClient panics on either; the scripts write anyway.
		fo.RouteByLatency, fo.RouteRandomly = false, false
		fo.ReplicaOnly, fo.UseDisconnectedReplicas = false, false
		o.failover = fo
		return o, nil
	case !isCluster:
		so, err := goredis.ParseURL(parsed.String())
		if err != nil {
			return nil, invalidURL(err)
		}
		if so.TLSConfig != nil {
			if err := tlsfiles.Apply(so.TLSConfig, files); err != nil {
				return nil, err
			}
		}
		contract{&so.ContextTimeoutEnabled, &so.MaxRetries, &so.DialerRetries, &so.MinIdleConns,
			&so.DialTimeout, &so.ReadTimeout, &so.WriteTimeout, &so.PoolTimeout,
			&so.MaintNotificationsConfig}.force(timeouts)
		o.single = so
		return o, nil
	}
	if p := strings.Trim(u.Path, "/"); p != "" && p != "0" {
		return nil, driver.Invalid("url: path",
			"a Redis Cluster has only database 0, got "+driver.Quote(u.Path))
	}
	parsed.Path = ""
	co, err := goredis.ParseClusterURL(parsed.String())
	if err != nil {
		return nil, invalidURL(err)
	}
	if co.TLSConfig != nil {
		if err := tlsfiles.Apply(co.TLSConfig, files); err != nil {
			return nil, err
		}
	}
	contract{&co.ContextTimeoutEnabled, &co.MaxRetries, &co.DialerRetries, &co.MinIdleConns,
		&co.DialTimeout, &co.ReadTimeout, &co.WriteTimeout, &co.PoolTimeout,
		&co.MaintNotificationsConfig}.force(timeouts)
	co.ReadOnly, co.RouteByLatency, co.RouteRandomly = false, false, false
	// Keyed commands only: no COMMAND round trip to learn routing tips.
	co.DisableRoutingPolicies = true
	o.cluster = co
	return o, nil
}

// contract points at the go-redis settings the contract forces, in
// Options or ClusterOptions (the same fields in both).
type contract struct {
	contextTimeout                  *bool
	maxRetries, dialerRetries, idle *int
	dial, read, write, pool         *time.Duration
	// maint is nil when the client has none (FailoverOptions: always off).
	maint **maintnotifications.Config
}

// force sets them: context deadlines reach the socket (T1); no client
// retries and one dial attempt (T5, T2); no connection before the first
// call (T3); the client timeouts as read from the URL, each at most the
// budget (T1, T4); no maintenance notifications (they need a handshake
// command of their own).
func (c contract) force(timeouts map[string]time.Duration) {
	*c.contextTimeout = true
	*c.maxRetries = -1
	*c.dialerRetries = 1
	*c.idle = 0
	*c.dial = timeouts["dial_timeout"]
	*c.read = timeouts["read_timeout"]
	*c.write = timeouts["write_timeout"]
	*c.pool = timeouts["pool_timeout"]
	if c.maint != nil {
		*c.maint = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	}
}

// invalidURL wraps a go-redis parse error. Those quote a parameter's
// value or the path, never the userinfo.
func invalidURL(err error) error {
	return driver.Invalid("url", strings.TrimPrefix(err.Error(), "redis: "))
}
