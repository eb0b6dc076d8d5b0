// Package postgres is the PostgreSQL driver of fleetstore (pgx v5 and its
// pool): one call of a plpgsql function per Hit, on the server's clock.
// Blank-import it and open a URL:
//
//	import _ "github.com/fleetstore/fleetstore/drivers/postgres"
//
//	fleetstore.Open("postgres://edge:PASSWORD@db:5432/app?timeout=100ms")
//	// TLS with the server checked against a CA of your own
//	fleetstore.Open("postgresql://edge@db.example.com/app?tls_ca_file=/etc/fleet/ca.pem")
//
// The schemes are postgres and postgresql. The URL is pgx's (pgxpool's
// ParseConfig): user and password in the userinfo, database in the path,
// several hosts comma-separated. The password never appears in an error
// or a log line.
//
// # URL parameters
//
// Besides the common ones (timeout, key_prefix, fallback_*):
//
//	schema               the schema of the driver's tables and functions. Default fleetstore.
//	schema_install       on: install the schema on first contact (see Schema). off: it is
//	                     installed already (SchemaSQL). Default on.
//	sweep_interval       Go duration between sweeps of expired rows, or off. Default 1s.
//	tls_ca_file          PEM file of the CAs that verify the server (libpq's sslrootcert);
//	                     sets sslmode=verify-full unless sslmode is given.
//	tls_cert_file        PEM file of the client certificate (sslcert); needs tls_key_file.
//	tls_key_file         PEM file of its private key (sslkey).
//	sslmode, sslrootcert, sslcert, sslkey, sslsni
//	                     libpq's, as pgx reads them. Default sslmode prefer.
//	application_name     shown in pg_stat_activity. Default none.
//	target_session_attrs libpq's: read-write (the functions write) to skip a standby
//	                     among several hosts. Default any.
//	connect_timeout      libpq's, whole seconds; at most the timeout or 1s (see Cold start).
//	synchronous_commit   the sessions' setting (see Deploying). Default the server's.
//	pool_max_conns       connections of the Store's pool, ≥ 1. Default 4.
//	pool_max_conn_lifetime, pool_max_conn_idle_time, pool_health_check_period
//	                     pgxpool's, Go durations > 0.
//
// Refused with the reason: pool_min_conns and pool_min_idle_conns (Open
// connects nothing, CONTRACT T3; see Cold start).
//
// # How a call runs
//
// A Hit is one statement, SELECT … FROM hit_v2(…), sent with pgx's
// QueryExecModeExec: one round trip, no statement preparation. The
// function takes a transaction-scoped advisory lock on (key_prefix,
// tenant), reads the clock (clock_timestamp, in µs), the buckets, the
// quota windows and the claim, decides (CONTRACT §3, §3.2, §4) and
// writes, in the statement's own transaction. A Peek is one statement
// that writes nothing; Reset one DELETE of the tenant's buckets and
// windows.
//
// A calendar quota counts in the window that holds the server's clock,
// among the three its charge sends; none does: an error marked
// ErrorReply, nothing written. Every charge of a Hit, bucket or quota, is
// decided before anything is written, so a Hit denied by either takes
// nothing from the other. The advisory lock orders the Hits of a tenant,
// so Stores at once admit exactly a quota's units.
// Commits and Releases go in rounds, as on Redis: a call that finds no
// round in flight is sent at once; those that arrive meanwhile go
// together in the next round, one call of settle_v1 for all of them.
//
// Every connection runs with statement_timeout and lock_timeout set to the
// Store's timeout, so that a statement whose caller gave up stops within
// the budget (T4), and a statement that waits on a lock that long fails
// as ErrTimeout. A call's context cancels it on the client side (pgx
// closes the connection). pgx never sends a statement twice; a pooled
// connection the server closed (a restart: FATAL 57P01) is dropped before
// use, so a restart between two calls is invisible (T5).
//
// # Errors
//
// The server's error answers are marked driver.ErrorReply: the store was
// reached. Two kinds are not. An answer that the server is going away or
// out of resources is an outage: classes 08, 53 and 57P, any FATAL or
// PANIC. A statement or lock timeout, 57014 or 55P03, is ErrTimeout.
//
// # Expiry
//
// PostgreSQL has no TTL. Every row carries its expiry (a bucket's is its
// TAT, a quota window's its end) and every function treats a row past it
// as absent, so expiry is exact on the server's clock whatever is still
// stored. A sweep deletes
// them. Every sweep_interval, the one Store of a database that wins a
// try-lock deletes the expired rows of the next 256 pages of each table.
// It reads them by TID range, with no index on the expiry, so the Hits'
// updates stay HOT. A tick sweeps eight such ranges at most, or the whole
// table once. The tables then hold about the rows written in one pass,
// plus the live ones; TestTablesStayBounded shows it.
//
// # Cold start
//
// Open connects nothing (T3). A connect is bounded by the larger of the
// timeout and 1s, and goes on after its call returned at its deadline, so
// that the next calls find its connection. The first calls of a Store each
// pay a connect (TCP, a backend forked, startup, authentication: a few ms
// on a LAN, more with TLS or SCRAM), and the first Hit on a connection
// compiles the plpgsql function. On a busy server a connect can take more
// than the default 100ms budget: the calls of a cold Store then time out
// until its connects, which go on, are done. Give such a deployment a
// longer budget (timeout=250ms) or a pool of your own, connected ahead of
// load (FromPool with pgxpool's MinConns).
//
// # Schema
//
// The driver keeps its state in one schema (schema=, default fleetstore),
// which SchemaSQL installs. Its tables are buckets_v1, claims_v1 and
// windows_v1; its functions hit_v2, peek_v2, windows_v2, settle_v1,
// sweep_v2 and now_v1.
// key_prefix is part of every row's key, so Stores of several prefixes
// share the tables. What a committed claim takes on disk (its row, its
// index entry and the free space its update left) is measured by make
// compare's Postgres rows (bench/README.md). A quota window is a row of
// about 150 bytes of heap and 86 of index, for a 24-byte tenant
// (BenchmarkWindowRowBytes). A quota holds one row, and the last window's
// until the sweep passes.
//
// With schema_install=on, a call that finds them missing installs them
// and runs once more: the server's answer proves that the call did not
// run. The install takes an advisory lock and runs in one transaction.
// The Store's role then needs CREATE on the database, for the schema.
// PostgreSQL 15 revoked CREATE on the public schema, which the driver does
// not use. Teams that install schemas themselves run SchemaSQL with a
// role of their own, and open the Stores with schema_install=off.
//
// A driver version that changes a table or a function's arguments adds
// new ones beside the old, under a new suffix: Stores of both versions
// run during a rolling upgrade. The calendar quotas added windows_v1 and
// the _v2 functions. A schema installed before them lacks sweep_v2: with
// schema_install=on, the first call that finds a function missing runs
// SchemaSQL, which adds what is missing and keeps the buckets and claims.
// With schema_install=off, run SchemaSQL before the new Stores start; it
// leaves hit_v1 and sweep_v1 to the Stores of the earlier version. Drop
// them once none is left.
//
// # Deploying
//
// A claim is committed when the function's transaction commits. With
// synchronous_commit on, the default, a claim that a Hit or Commit
// reported is on the primary's disk. With asynchronous replication a
// failover loses what the standby had not received, the last commits, as
// on Redis: a redelivery of those hooks is accepted again. A quota's
// count goes back by the units those Hits took, and its window admits
// them again. Set
// synchronous_standby_names (and synchronous_commit on or remote_apply)
// to lose none, at the cost of a standby round trip per call;
// synchronous_commit off loses up to three wal_writer_delay of commits in
// a crash of the primary itself.
//
// The Hits of one tenant are serialized by its advisory lock, which is held
// until the statement's transaction commits: with synchronous_commit on,
// through a WAL flush. One tenant then takes at most one Hit per flush
// (about 1 000–3 000 a second on an SSD); different tenants run in
// parallel, and their flushes are shared. A store whose single busiest
// tenant needs more sets synchronous_commit=off in the URL, for the
// Stores' sessions only, and accepts that loss.
//
// # The claim in your own transaction
//
// Settler commits or releases claims in a pgx.Tx of the application's, so
// that the hook's own row and its claim commit or roll back together; see
// Settler and the webhook Sink example.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/internal/round"
)

func init() {
	for _, scheme := range []string{"postgres", "postgresql"} {
		fleetstore.Register(scheme, Driver{})
	}
}

// Driver opens PostgreSQL stores. It is registered as "postgres" and
// "postgresql".
type Driver struct{}

var _ driver.Driver = Driver{}

// Open implements driver.Driver: it parses the URL and builds the pool,
// without any network I/O (T3).
func (Driver) Open(cfg driver.Config) (driver.Conn, error) {
	o, err := parseOptions(cfg.URL.Query(), cfg.Timeout)
	if err != nil {
		return nil, err
	}
	pc, err := poolConfig(cfg, o)
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", driver.Invalid("url", safeErr(err)))
	}
	return newConn(pool, true, cfg, o), nil
}

// options are the driver's own URL parameters.
type options struct {
	schema  string
	install bool
	sweep   time.Duration // 0: off
}

// The driver's own parameters, and the pgx ones it passes on.
var (
	ownParams = []string{"schema", "schema_install", "sweep_interval",
		"tls_ca_file", "tls_cert_file", "tls_key_file"}
	pgxParams = []string{"sslmode", "sslrootcert", "sslcert", "sslkey", "sslsni",
		"application_name", "target_session_attrs", "connect_timeout", "synchronous_commit", "pool_max_conns",
		"pool_max_conn_lifetime", "pool_max_conn_idle_time", "pool_health_check_period"}
	refused = map[string]string{
		"pool_min_conns":      "Open connects nothing (CONTRACT T3); connect ahead of load with a pool of your own (FromPool)",
		"pool_min_idle_conns": "Open connects nothing (CONTRACT T3); connect ahead of load with a pool of your own (FromPool)",
	}
)

func parseOptions(q url.Values, budget time.Duration) (options, error) {
	o := options{schema: "fleetstore", install: true, sweep: time.Second}
	if err := driver.RefuseParams(q, refused); err != nil {
		return o, err
	}
	if err := driver.CheckParams(q, append(append([]string{}, ownParams...), pgxParams...)...); err != nil {
		return o, err
	}
	for name, v := range q {
		if len(v) > 1 {
			return o, driver.Invalid("url: "+name, "given more than once")
		}
	}
	if q.Has("schema") {
		o.schema = q.Get("schema")
		if !validSchema(o.schema) {
			return o, driver.Invalid("url: schema", "want [a-z_][a-z0-9_]{0,62}, got "+driver.Quote(o.schema))
		}
	}
	switch v := q.Get("schema_install"); v {
	case "", "on":
	case "off":
		o.install = false
	default:
		return o, driver.Invalid("url: schema_install", "want on or off, got "+driver.Quote(v))
	}
	if v := q.Get("sweep_interval"); v == "off" {
		o.sweep = 0
	} else if v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 10*time.Millisecond {
			return o, driver.Invalid("url: sweep_interval", "want off or a Go duration ≥ 10ms, got "+driver.Quote(v))
		}
		o.sweep = d
	}
	if v := q.Get("connect_timeout"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || time.Duration(n)*time.Second > connectTimeout(budget) {
			return o, driver.Invalid("url: connect_timeout", "want whole seconds ≥ 1, at most "+
				connectTimeout(budget).String()+", got "+driver.Quote(v))
		}
	}
	if v := q.Get("pool_max_conns"); v != "" {
		if n, err := strconv.ParseInt(v, 10, 32); err != nil || n < 1 {
			return o, driver.Invalid("url: pool_max_conns", "want a whole number ≥ 1, got "+driver.Quote(v))
		}
	}
	// pgxpool takes a period ≤ 0 as it is, and its health check then
	// panics in a goroutine of its own.
	for _, name := range []string{"pool_max_conn_lifetime", "pool_max_conn_idle_time", "pool_health_check_period"} {
		if v := q.Get(name); v != "" {
			if d, err := time.ParseDuration(v); err != nil || d <= 0 {
				return o, driver.Invalid("url: "+name, "want a Go duration > 0, got "+driver.Quote(v))
			}
		}
	}
	// A value the server refuses fails every connect, which a caller
	// would take for an outage.
	for name, values := range map[string][]string{
		"synchronous_commit": {"on", "off", "local", "remote_write", "remote_apply",
			"true", "false", "yes", "no", "1", "0"},
		"target_session_attrs": {"any", "read-write", "read-only", "primary", "standby", "prefer-standby"},
	} {
		if v := q.Get(name); v != "" && !slices.Contains(values, v) {
			return o, driver.Invalid("url: "+name, "want one of "+strings.Join(values, ", ")+", got "+
				driver.Quote(v))
		}
	}
	if q.Has("tls_cert_file") != q.Has("tls_key_file") {
		return o, driver.Invalid("url: tls_cert_file", "tls_cert_file and tls_key_file go together")
	}
	return o, nil
}

func validSchema(s string) bool {
	if s == "" || len(s) > 63 {
		return false
	}
	for i, c := range s {
		ok := c == '_' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9'
		if !ok {
			return false
		}
	}
	return true
}

// poolConfig is pgxpool's config for the URL, with the settings the
// contract needs.
func poolConfig(cfg driver.Config, o options) (*pgxpool.Config, error) {
	u := *cfg.URL
	u.Scheme = "postgres"
	q := u.Query()
	for _, name := range []string{"schema", "schema_install", "sweep_interval"} {
		q.Del(name)
	}
	for from, to := range map[string]string{"tls_ca_file": "sslrootcert", "tls_cert_file": "sslcert",
		"tls_key_file": "sslkey"} {
		if q.Has(from) {
			q.Set(to, q.Get(from))
			q.Del(from)
		}
	}
	if cfg.URL.Query().Has("tls_ca_file") && !q.Has("sslmode") {
		q.Set("sslmode", "verify-full")
	}
	if !q.Has("pool_max_conns") {
		q.Set("pool_max_conns", "4")
	}
	u.RawQuery = q.Encode()
	pc, err := pgxpool.ParseConfig(u.String())
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", driver.Invalid("url", safeErr(err)))
	}
	if pc.ConnConfig.ConnectTimeout == 0 {
		pc.ConnConfig.ConnectTimeout = connectTimeout(cfg.Timeout)
	}
	setSession(pc, cfg.Timeout)
	return pc, nil
}

// connectTimeout bounds a connect: the budget, and at least 1s. A call
// returns at its deadline whatever its connect does (pgxpool's Acquire).
// The connect goes on in the background, so that a cold pool under load
// still fills and the next calls find connections: a fork and a startup
// per connection can take more than 100ms on a busy server.
func connectTimeout(budget time.Duration) time.Duration { return max(budget, time.Second) }

// setSession sets what every connection of pc needs: statements sent in
// one round trip (QueryExecModeExec), statement_timeout and lock_timeout of
// the budget, no ping before use and dead connections dropped before use.
func setSession(pc *pgxpool.Config, budget time.Duration) {
	ms := strconv.FormatInt(max(budget.Milliseconds(), 1), 10)
	pc.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
	// No answer of ours is near 1 MiB; a message declaring more is not
	// PostgreSQL's, and is not allocated (V4).
	pc.ConnConfig.MaxProtocolMessageBodyLen = 1 << 20
	if pc.ConnConfig.RuntimeParams == nil {
		pc.ConnConfig.RuntimeParams = map[string]string{}
	}
	pc.ConnConfig.RuntimeParams["statement_timeout"] = ms
	pc.ConnConfig.RuntimeParams["lock_timeout"] = ms
	pc.MinConns, pc.MinIdleConns = 0, 0
	pc.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
	pc.PrepareConn = func(_ context.Context, c *pgx.Conn) (bool, error) { return alive(c.PgConn()), nil }
}

// safeErr is err's text without the connection string pgx quotes.
func safeErr(err error) string {
	var pe *pgconn.ParseConfigError
	if errors.As(err, &pe) {
		if inner := pe.Unwrap(); inner != nil {
			return "cannot parse: " + inner.Error()
		}
		return "cannot parse the URL"
	}
	return err.Error()
}

// conn is a driver.Conn on a pgx pool.
type conn struct {
	pool    *pgxpool.Pool
	own     bool // the pool is the driver's: Close closes it
	prefix  string
	schema  string
	install bool
	sweep   time.Duration
	timeout time.Duration
	log     *zap.Logger
	q       queries

	started atomic.Bool // a call was answered: the sweep runs

	// bg is cancelled by Close; the install and the sweep run under it
	// and Close waits for them (T4).
	bg     context.Context
	stopBG context.CancelFunc
	wg     sync.WaitGroup

	imu        sync.Mutex
	installing chan struct{} // closed when the install in flight ends
	installErr error

	rounds *round.Queue[*settleCall, settleResult] // group commit (group.go)
}

var (
	_ driver.Conn   = (*conn)(nil)
	_ driver.Peeker = (*conn)(nil)
)

// queries are the statements of a schema.
type queries struct {
	hit, settle, peek, reset, sweep string
}

func newQueries(schema string) queries {
	s := pgx.Identifier{schema}.Sanitize()
	return queries{
		hit: "SELECT outcome, holder, wait, resets, used FROM " + s + ".hit_v2($1::text, $2::bytea, $3::bigint, " +
			"$4::text[], $5::bigint[], $6::bigint[], $7::bigint[], $8::bigint[], $9::bigint[], " +
			"$10::bytea, $11::bytea, $12::bytea, $13::bigint)",
		settle: "SELECT codes, holders FROM " + s + ".settle_v1($1::boolean[], $2::bytea[], $3::bigint[], " +
			"$4::bytea[], $5::bytea[], $6::bigint[])",
		peek: "SELECT resets, used FROM " + s + ".peek_v2($1::text, $2::bytea, $3::text[], $4::bigint[], " +
			"$5::bigint[])",
		reset: "WITH w AS (DELETE FROM " + s + ".windows_v1 WHERE prefix = $1::text AND tenant = $2::bytea) " +
			"DELETE FROM " + s + ".buckets_v1 WHERE prefix = $1::text AND tenant = $2::bytea",
		sweep: "SELECT deleted, next FROM " + s + ".sweep_v2($1::bigint, $2::integer)",
	}
}

func newConn(pool *pgxpool.Pool, own bool, cfg driver.Config, o options) *conn {
	c := &conn{pool: pool, own: own, prefix: cfg.KeyPrefix, schema: o.schema, install: o.install,
		sweep: o.sweep, timeout: cfg.Timeout, log: cfg.Logger, q: newQueries(o.schema)}
	c.bg, c.stopBG = context.WithCancel(context.Background())
	c.rounds = c.newRounds()
	return c
}

// queryRow runs sql and scans its one row into dest. When the server
// answers that the schema is missing (the statement did not run) and
// schema_install is on, it installs the schema and runs sql once more.
func (c *conn) queryRow(ctx context.Context, sql string, args []any, dest ...any) error {
	err := c.pool.QueryRow(ctx, sql, args...).Scan(dest...)
	if err != nil && c.install && missingSchema(err) {
		if err = c.ensureSchema(ctx); err == nil {
			err = c.pool.QueryRow(ctx, sql, args...).Scan(dest...)
		}
	}
	return c.done(err)
}

// done marks err and, on the first answered call, starts the sweep.
func (c *conn) done(err error) error {
	if err == nil || errors.As(err, new(*pgconn.PgError)) {
		if !c.started.Swap(true) {
			c.startBackground()
		}
	}
	return mark(err)
}

// mark marks err as the server's own answer, an outage or a timeout
// (package doc, Errors).
func mark(err error) error {
	var pe *pgconn.PgError
	if err == nil || !errors.As(err, &pe) {
		return err
	}
	switch {
	case pe.Code == "57014" || pe.Code == "55P03": // query_canceled (statement_timeout), lock_not_available
		return fmt.Errorf("%w: %w", driver.ErrTimeout, err)
	case pe.Severity == "FATAL" || pe.Severity == "PANIC" || strings.HasPrefix(pe.Code, "08") ||
		strings.HasPrefix(pe.Code, "53") || strings.HasPrefix(pe.Code, "57P"):
		return fmt.Errorf("%w: %w", driver.ErrUnavailable, err)
	}
	return driver.ErrorReply(err)
}

// ensureSchema installs the schema, one install at a time per Conn, on a
// connection of the pool and the background context: a caller that gives
// up does not cut the install short. The caller waits for it or for its
// own context.
func (c *conn) ensureSchema(ctx context.Context) error {
	c.imu.Lock()
	ch := c.installing
	if ch == nil {
		ch = make(chan struct{})
		c.installing = ch
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			ictx, cancel := context.WithTimeout(c.bg, 30*time.Second)
			defer cancel()
			err := c.pool.AcquireFunc(ictx, func(pc *pgxpool.Conn) error {
				return install(ictx, pc.Conn(), c.schema)
			})
			if err != nil {
				c.log.Warn("postgres: schema install failed", zap.String("schema", c.schema), zap.Error(err))
			} else {
				c.log.Info("postgres: schema installed", zap.String("schema", c.schema))
			}
			c.imu.Lock()
			c.installErr, c.installing = err, nil
			c.imu.Unlock()
			close(ch)
		}()
	}
	c.imu.Unlock()
	select {
	case <-ch:
		c.imu.Lock()
		err := c.installErr
		c.imu.Unlock()
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// chargeArgs are the arrays of hit_v2's and peek_v2's charges: kinds,
// GCRA increments and capacities (µs), window maxima and costs (0 for a
// GCRA charge) and the four edges of each charge's windows, flattened.
type chargeArgs struct {
	kinds            []string
	incs, caps       []int64
	wmax, wcost, eds []int64
}

func newChargeArgs(charges []driver.Charge) chargeArgs {
	a := chargeArgs{kinds: make([]string, len(charges)), incs: make([]int64, len(charges)),
		caps: make([]int64, len(charges)), wmax: make([]int64, len(charges)),
		wcost: make([]int64, len(charges)), eds: make([]int64, 0, 4*len(charges))}
	for i, ch := range charges {
		a.kinds[i] = string(ch.Kind)
		a.incs[i] = ch.Increment.Microseconds()
		a.caps[i] = ch.Capacity.Microseconds()
		a.wmax[i] = ch.Window.Max
		a.wcost[i] = ch.Window.Cost
		a.eds = append(a.eds, ch.Window.Edges[:]...)
	}
	return a
}

// Hit implements driver.Conn: one call of hit_v2 (CONTRACT §3, §3.2, §4).
func (c *conn) Hit(ctx context.Context, charges []driver.Charge, claim *driver.Claim) (driver.Result, error) {
	var tenant string
	if len(charges) > 0 {
		tenant = charges[0].Tenant
	} else {
		tenant = claim.Tenant
	}
	a := newChargeArgs(charges)
	var id, hook, node []byte
	var pending int64
	if claim != nil {
		id = claimID(c.prefix, claim)
		hook, node = []byte(claim.HookID), []byte(claim.Node)
		pending = claim.PendingTTL.Microseconds()
	}
	var (
		outcome int32
		holder  []byte
		wait    int64
		resets  []int64
		used    []int64
	)
	err := c.queryRow(ctx, c.q.hit, []any{c.prefix, []byte(tenant), tenantKey(c.prefix, tenant), a.kinds, a.incs,
		a.caps, a.wmax, a.wcost, a.eds, id, hook, node, pending}, &outcome, &holder, &wait, &resets, &used)
	if err != nil {
		return driver.Result{}, err
	}
	return decodeHit(len(charges), outcome, holder, wait, resets, used)
}

// decodeHit turns hit_v2's answer into a Result; an answer no function of
// ours gives is an error (V4).
func decodeHit(n int, outcome int32, holder []byte, wait int64, resets, used []int64) (driver.Result, error) {
	var r driver.Result
	if outcome < int32(driver.OK) || outcome > int32(driver.RateLimited) || wait < 0 {
		return r, driver.ErrorReply(errors.New("postgres: malformed hit_v2 answer"))
	}
	if err := setBuckets(&r, n, resets, used); err != nil {
		return r, err
	}
	r.Outcome = driver.Outcome(outcome)
	switch r.Outcome {
	case driver.Duplicate:
		r.HookID = string(holder)
	case driver.Pending, driver.RateLimited:
		ms := max((wait+999)/1000, 1)
		r.RetryAfter = time.Duration(ms) * time.Millisecond
	}
	return r, nil
}

// setBuckets sets the state of r's n charges from a function's answer:
// each charge's reset-after and window count.
func setBuckets(r *driver.Result, n int, resets, used []int64) error {
	if len(resets) != n || len(used) != n || n > driver.MaxCharges {
		return driver.ErrorReply(errors.New("postgres: malformed answer: one state per charge expected"))
	}
	r.NBuckets = n
	for i := range n {
		if resets[i] < 0 || used[i] < 0 {
			return driver.ErrorReply(errors.New("postgres: malformed answer: a negative state"))
		}
		r.Buckets[i].ResetAfter = time.Duration(resets[i]) * time.Microsecond
		r.Buckets[i].Used = used[i]
	}
	return nil
}

// Peek implements driver.Peeker: one call of peek_v2, which writes
// nothing (CONTRACT G11, §3.2).
func (c *conn) Peek(ctx context.Context, charges []driver.Charge) (driver.Result, error) {
	a := newChargeArgs(charges)
	var resets, used []int64
	err := c.queryRow(ctx, c.q.peek, []any{c.prefix, []byte(charges[0].Tenant), a.kinds, a.wmax, a.eds},
		&resets, &used)
	if err != nil {
		return driver.Result{}, err
	}
	var r driver.Result
	if err := setBuckets(&r, len(charges), resets, used); err != nil {
		return driver.Result{}, err
	}
	return r, nil
}

// Reset implements driver.Conn: one statement deletes the tenant's
// buckets and quota windows (G5, CONTRACT §3.2). Without the schema there
// is nothing to delete. A schema of an earlier driver version, without
// windows_v1, is brought up to date first when schema_install is on, and
// is an error otherwise: its buckets are still there.
func (c *conn) Reset(ctx context.Context, tenant string) error {
	_, err := c.pool.Exec(ctx, c.q.reset, c.prefix, []byte(tenant))
	if err != nil && missingSchema(err) {
		if noSchema(err) {
			return c.done(nil)
		}
		if c.install {
			if err = c.ensureSchema(ctx); err == nil {
				_, err = c.pool.Exec(ctx, c.q.reset, c.prefix, []byte(tenant))
			}
		}
	}
	return c.done(err)
}

// Ping implements driver.Conn.
func (c *conn) Ping(ctx context.Context) error {
	return c.done(c.pool.Ping(ctx))
}

// Close implements driver.Conn: it stops the sweep and an install, waits for them, and closes the pool when it is the driver's.
func (c *conn) Close() error {
	c.stopBG()
	c.wg.Wait()
	if c.own {
		c.pool.Close()
	}
	return nil
}
