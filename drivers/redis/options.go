package redis

import (
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/internal/redisurl"
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
	urlSpec = redisurl.Spec{
		TLSScheme: "rediss", ClusterScheme: "redis+cluster", Master: "master_name",
		Single:   append([]string{"db", "skip_verify"}, commonParams...),
		Cluster:  append([]string{"addr", "max_redirects"}, commonParams...),
		Sentinel: append([]string{"master_name", "addr", "db", "skip_verify"}, commonParams...),
		Timeouts: []string{"dial_timeout", "read_timeout", "write_timeout", "pool_timeout"},
	}
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
	q := cfg.URL.Query()
	if err := driver.RefuseParams(q, refused); err != nil {
		return nil, err
	}
	if cfg.URL.Scheme == "redis+cluster" && q.Has("master_name") {
		return nil, driver.Invalid("url: master_name",
			"a Sentinel-managed master is a redis:// or rediss:// URL, not redis+cluster://")
	}
	u, err := urlSpec.Check(cfg)
	if err != nil {
		return nil, err
	}
	o := &options{display: cfg.URL.Redacted(), pipeline: u.Query.Get("pipeline")}
	switch o.pipeline {
	case "":
		o.pipeline = "auto"
	case "auto", "always", "off":
	default:
		return nil, driver.Invalid("url: pipeline",
			"want auto, always or off, got "+driver.Quote(o.pipeline))
	}
	u.Query.Del("pipeline") // ours, not go-redis's
	switch u.Form {
	case redisurl.Sentinel:
		o.failover, err = failoverOptions(u)
	case redisurl.Cluster:
		o.cluster, err = clusterOptions(u)
	default:
		o.single, err = singleOptions(u)
	}
	if err != nil {
		return nil, err
	}
	return o, nil
}

// singleOptions is go-redis's ParseURL of u, with the contract's settings.
func singleOptions(u *redisurl.Checked) (*goredis.Options, error) {
	so, err := goredis.ParseURL(u.String())
	if err != nil {
		return nil, invalidURL(err)
	}
	if err := u.TLS(so.TLSConfig); err != nil {
		return nil, err
	}
	contract{&so.ContextTimeoutEnabled, &so.MaxRetries, &so.DialerRetries, &so.MinIdleConns,
		&so.DialTimeout, &so.ReadTimeout, &so.WriteTimeout, &so.PoolTimeout,
		&so.MaintNotificationsConfig}.force(u.Timeouts)
	return so, nil
}

// clusterOptions is go-redis's ParseClusterURL of u, with the contract's
// settings.
func clusterOptions(u *redisurl.Checked) (*goredis.ClusterOptions, error) {
	if u.URL.Scheme == "redis+cluster" {
		u.URL.Scheme = "redis"
	}
	co, err := goredis.ParseClusterURL(u.String())
	if err != nil {
		return nil, invalidURL(err)
	}
	if err := u.TLS(co.TLSConfig); err != nil {
		return nil, err
	}
	contract{&co.ContextTimeoutEnabled, &co.MaxRetries, &co.DialerRetries, &co.MinIdleConns,
		&co.DialTimeout, &co.ReadTimeout, &co.WriteTimeout, &co.PoolTimeout,
		&co.MaintNotificationsConfig}.force(u.Timeouts)
	co.ReadOnly, co.RouteByLatency, co.RouteRandomly = false, false, false
	// Keyed commands only: no COMMAND round trip to learn routing tips.
	co.DisableRoutingPolicies = true
	return co, nil
}

// failoverOptions is go-redis's ParseFailoverURL of u, with the contract's
// settings and the userinfo the master's.
func failoverOptions(u *redisurl.Checked) (*goredis.FailoverOptions, error) {
	fo, err := goredis.ParseFailoverURL(u.String())
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
	if err := u.TLS(fo.TLSConfig); err != nil {
		return nil, err
	}
	contract{&fo.ContextTimeoutEnabled, &fo.MaxRetries, &fo.DialerRetries, &fo.MinIdleConns,
		&fo.DialTimeout, &fo.ReadTimeout, &fo.WriteTimeout, &fo.PoolTimeout, nil}.force(u.Timeouts)
	// NewFailoverClient panics on either; the scripts write anyway.
	fo.RouteByLatency, fo.RouteRandomly = false, false
	fo.ReplicaOnly, fo.UseDisconnectedReplicas = false, false
	return fo, nil
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
