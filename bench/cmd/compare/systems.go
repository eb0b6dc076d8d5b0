package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/go-redis/redis_rate/v10"
	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	"github.com/throttled/throttled/v2"
	goredisstore "github.com/throttled/throttled/v2/store/goredisstore.v9"
	"github.com/valkey-io/valkey-go"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/calendar"
	_ "github.com/fleetstore/fleetstore/drivers/redis"
	_ "github.com/fleetstore/fleetstore/drivers/valkey"
)

// op is one decision (or one hook) of a system, by worker w. It returns
// hit, the latency to report when the op is more than one call (a hook:
// the Hit, then the Commit), else 0 (the op's own latency is reported);
// ok is false for any answer but "allowed".
type op func(ctx context.Context, w *worker) (hit time.Duration, ok bool, err error)

// system is one row of the table: how to open it for one run.
type system struct {
	name  string
	about string
	hook  bool // op is a whole hook (Hit + Commit); hit latency is reported apart
	// cluster: the row runs on a cluster of three masters (env.nodes)
	cluster bool
	// pg: the row runs on the PostgreSQL cluster started for the Postgres
	// rows (-postgres), with a pool of -pg-pool connections.
	pg bool
	// quota: the row's Hit charges a monthly quota beside its two
	// buckets (monthQuota), the charges of a Plan{perSecond, perMonth}.
	quota bool
	open  func(e *env) (op, func(), error)
	// external, when not nil, runs the row instead of open: a command
	// that measures itself (pgbench), returning its ops and seconds.
	external func(ctx context.Context, p *pgServer, conc int, warmup, d time.Duration) (uint64, time.Duration, error)
}

// env is what a run's system is opened with.
type env struct {
	addr    string
	nodes   []string // a cluster row's masters (addr: the first)
	run     string   // unique per run: key prefixes and tenants are fresh
	pool    int      // go-redis pool size
	timeout time.Duration
	tenants []string
}

// The generous limits: every decision is allowed, so what is measured is
// the cost of deciding. fleetstore: 1µs per hook, an hour of burst.
const (
	fsIncrement = time.Microsecond
	fsCapacity  = time.Hour
	claimTTL    = time.Minute
	pendingTTL  = 30 * time.Second
)

var (
	// monthQuota is the quota rows' calendar quota: a month in UTC, too
	// large to deny (every Hit of a run is counted).
	monthQuota = fleetstore.MustLimit(fleetstore.NewQuota("hooks_month", fleetstore.MaxQuota,
		calendar.Month, time.UTC))
	// redis_rate: a million per second, a burst of a billion.
	rrLimit = redis_rate.Limit{Rate: 1_000_000, Period: time.Second, Burst: 1_000_000_000}
	// throttled: the same.
	thQuota = throttled.RateQuota{MaxRate: throttled.PerSec(1_000_000), MaxBurst: 1_000_000_000}
)

var systems = []system{
	{name: "ping-go-redis", open: openPingGoRedis,
		about: "PING, go-redis v9 (the round-trip floor of the redis driver, redis_rate, throttled)"},
	{name: "ping-valkey-go", open: openPingValkey,
		about: "PING, valkey-go with the valkey driver's settings (its round-trip floor)"},
	{name: "script-floor", open: openScriptFloor,
		about: "EVALSHA of a script that returns {1} at once, with a Hit's KEYS and ARGV, " +
			"go-redis v9 (the floor of any one-script decision)"},
	{name: "fleetstore-redis-hit", open: openFleetstore("redis", false),
		about: "fleetstore redis://: Hit alone (hooks + bytes charges and a claim, one script call)"},
	{name: "fleetstore-redis-hit-unpipelined",
		open: openFleetstoreURL("redis", "&pipeline=off", false),
		about: "fleetstore redis:// with pipeline=off: Hit alone, each call on its own pooled " +
			"connection (no auto-pipeliner)"},
	{name: "fleetstore-redis-hook", hook: true, open: openFleetstore("redis", true),
		about: "fleetstore redis://: the whole hook, Hit then Commit; " +
			"p50/p99 are the Hit's, ops/s are hooks"},
	{name: "fleetstore-redis-hit-quota", quota: true, open: openFleetstore("redis", false),
		about: "fleetstore redis://: Hit alone, as fleetstore-redis-hit with a monthly quota " +
			"charged beside its two buckets (three charges and a claim, one script call)"},
	{name: "fleetstore-valkey-hit", open: openFleetstore("valkey", false),
		about: "fleetstore valkey://: Hit alone"},
	{name: "fleetstore-valkey-hit-quota", quota: true, open: openFleetstore("valkey", false),
		about: "fleetstore valkey://: Hit alone, with a monthly quota beside its two buckets"},
	{name: "fleetstore-valkey-hook", hook: true, open: openFleetstore("valkey", true),
		about: "fleetstore valkey://: Hit then Commit; p50/p99 are the Hit's, ops/s are hooks"},
	{name: "fleetstore-redis-cluster-hook", hook: true, cluster: true, open: openFleetstore("redis", true),
		about: "fleetstore redis:// on a cluster of three masters: Hit then Commit, " +
			"server CPU and script calls summed over the masters"},
	{name: "fleetstore-valkey-cluster-hook", hook: true, cluster: true, open: openFleetstore("valkey", true),
		about: "fleetstore valkey:// on a cluster of three masters: Hit then Commit"},
	{name: "fleetstore-postgres-hit", pg: true, open: openFleetstorePostgres(false),
		about: "fleetstore postgres://: Hit alone (one hit_v2 statement), a pool of -pg-pool connections"},
	{name: "fleetstore-postgres-hook", pg: true, hook: true, open: openFleetstorePostgres(true),
		about: "fleetstore postgres://: Hit then Commit; p50/p99 are the Hit's, ops/s are hooks"},
	{name: "pgbench-N", pg: true, external: runPgbench,
		about: "pgbench -N (simple-update: one account updated, one read, one history row) with c " +
			"clients on the same server, for the warm-up and duration rounded up plus 1s; ops/s are its tps " +
			"without connection time; no latencies"},
	{name: "pgx-job", pg: true, hook: true, open: openPgxJob,
		about: "the hook's job written plainly with pgx: a transaction (SELECT … FOR UPDATE of the " +
			"buckets, GCRA in Go, their upserts, INSERT … ON CONFLICT of the claim), then the " +
			"Commit's UPDATE; a pool of -pg-pool connections"},
	{name: "redis_rate", open: openRedisRate,
		about: "go-redis/redis_rate v10 Allow: one GCRA bucket, one Lua script call"},
	{name: "redis_rate-job", open: openRedisRateJob,
		about: "redis_rate doing a Hit's job without atomicity: Allow on hooks, Allow on bytes, " +
			"SET NX PX of the claim (three round trips)"},
	{name: "throttled", open: openThrottled,
		about: "throttled v2 GCRA RateLimit over its go-redis v9 store: one bucket, " +
			"GET+TIME then a CAS script"},
}

func newGoRedis(e *env) *goredis.Client {
	return goredis.NewClient(&goredis.Options{Addr: e.addr, PoolSize: e.pool})
}

// newDriverGoRedis is a go-redis client with the redis driver's settings
// (deadlines on the socket, no retries, every timeout the budget): the
// same client for the floor rows as for fleetstore's Hit.
func newDriverGoRedis(e *env) *goredis.Client {
	return goredis.NewClient(&goredis.Options{
		Addr: e.addr, PoolSize: e.pool,
		ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1,
		DialTimeout: e.timeout, ReadTimeout: e.timeout, WriteTimeout: e.timeout, PoolTimeout: e.timeout,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	})
}

func openPingGoRedis(e *env) (op, func(), error) {
	c := newDriverGoRedis(e)
	return func(ctx context.Context, _ *worker) (time.Duration, bool, error) {
		return 0, true, c.Ping(ctx).Err()
	}, func() { _ = c.Close() }, nil
}

// floorScript returns what an OK Hit returns, touching nothing: what is
// left of a Hit's cost is the script call itself and its arguments.
var floorScript = goredis.NewScript("return {1}")

func openScriptFloor(e *env) (op, func(), error) {
	c := newDriverGoRedis(e)
	return func(ctx context.Context, w *worker) (time.Duration, bool, error) {
		tenant := e.tenants[w.next()%uint64(len(e.tenants))]
		key := w.key()
		// KEYS and ARGV the shape of a Hit's with two charges and a claim
		// (internal/scripts.HitCall: shard 0 and the claim key; the
		// charges, hook_id and pending TTL).
		tag := "fs" + e.run + ":{" + tenant + "}"
		keys := []string{tag + ":s0", tag + "0123456789abcdef"}
		err := floorScript.Run(ctx, c, keys, "2", "hooks:", "1", "3600000000", "bytes:", "1", "3600000000",
			key, "30000000").Err()
		return 0, err == nil, err
	}, func() { _ = c.Close() }, nil
}

// newValkey builds a valkey-go client with the settings the valkey driver
// forces (drivers/valkey/options.go): no cache, no retries, the reader
// always on, one connection shared by auto-pipelining.
func newValkey(e *env) (valkey.Client, error) {
	return valkey.NewClient(valkey.ClientOption{
		InitAddress:       []string{e.addr},
		DisableCache:      true,
		DisableRetry:      true,
		AlwaysPipelining:  true,
		PipelineMultiplex: -1,
	})
}

func openPingValkey(e *env) (op, func(), error) {
	c, err := newValkey(e)
	if err != nil {
		return nil, nil, err
	}
	cmd := c.B().Ping().Build().Pin() // pinned: reusable by every call
	return func(ctx context.Context, _ *worker) (time.Duration, bool, error) {
		return 0, true, c.Do(ctx, cmd).Error()
	}, c.Close, nil
}

// openFleetstore opens a Store of scheme doing the webhook edge's job: two
// charges (hooks, bytes) and a claim on a fresh event key per Hit; with
// commit, a Commit after each OK Hit.
func openFleetstore(scheme string, commit bool) func(e *env) (op, func(), error) {
	return openFleetstoreURL(scheme, "", commit)
}

// openFleetstoreURL is openFleetstore with more URL parameters (each
// starting with &).
func openFleetstoreURL(scheme, params string, commit bool) func(e *env) (op, func(), error) {
	return func(e *env) (op, func(), error) {
		target := e.addr + "/0?"
		if len(e.nodes) > 0 {
			target = e.nodes[0] + "?addr=" + strings.Join(e.nodes[1:], "&addr=") + "&"
		}
		u := fmt.Sprintf("%s://%stimeout=%s&key_prefix=fs%s%s", scheme, target, e.timeout, e.run, params)
		if scheme == "redis" {
			u += "&pool_size=" + strconv.Itoa(e.pool)
		}
		st, err := fleetstore.Open(u)
		if err != nil {
			return nil, nil, err
		}
		return storeOp(e, st, commit), func() { _ = st.Close() }, nil
	}
}

// openFleetstorePostgres opens a Store on the Postgres rows' server, doing
// what openFleetstore's does.
func openFleetstorePostgres(commit bool) func(e *env) (op, func(), error) {
	return func(e *env) (op, func(), error) {
		st, err := fleetstore.Open(pgURL(e))
		if err != nil {
			return nil, nil, err
		}
		return storeOp(e, st, commit), func() { _ = st.Close() }, nil
	}
}

// storeOp is the op of a Store row: a Hit of two charges and a claim on a
// fresh event key; with commit, a Commit after each OK Hit.
func storeOp(e *env, st *fleetstore.Store, commit bool) op {
	return func(ctx context.Context, w *worker) (time.Duration, bool, error) {
		tenant := e.tenants[w.next()%uint64(len(e.tenants))]
		for i := range w.charges {
			w.charges[i].Tenant = tenant
		}
		key := w.key()
		claim := fleetstore.Claim{Tenant: tenant, SourceID: "github", Key: key, HookID: key,
			Node: "edge-1", TTL: claimTTL, PendingTTL: pendingTTL}
		t0 := time.Now()
		res, err := st.Hit(ctx, w.charges, &claim)
		hit := time.Since(t0)
		if err != nil || res.Outcome != fleetstore.OK {
			return hit, false, err
		}
		if commit {
			if err := st.Commit(ctx, claim); err != nil {
				return hit, false, err
			}
		}
		return hit, true, nil
	}
}

func openRedisRate(e *env) (op, func(), error) {
	c := newGoRedis(e)
	l := redis_rate.NewLimiter(c)
	return func(ctx context.Context, w *worker) (time.Duration, bool, error) {
		key := "rr" + e.run + ":" + e.tenants[w.next()%uint64(len(e.tenants))]
		res, err := l.Allow(ctx, key, rrLimit)
		if err != nil {
			return 0, false, err
		}
		return 0, res.Allowed == 1, nil
	}, func() { _ = c.Close() }, nil
}

// openRedisRateJob does with redis_rate what one fleetstore Hit does:
// two buckets and a claim, here in three round trips and not all or
// nothing (a denied bytes bucket leaves the hooks bucket charged).
func openRedisRateJob(e *env) (op, func(), error) {
	c := newGoRedis(e)
	l := redis_rate.NewLimiter(c)
	return func(ctx context.Context, w *worker) (time.Duration, bool, error) {
		tenant := e.tenants[w.next()%uint64(len(e.tenants))]
		prefix := "rj" + e.run + ":" + tenant
		for _, kind := range []string{":hooks", ":bytes"} {
			res, err := l.Allow(ctx, prefix+kind, rrLimit)
			if err != nil || res.Allowed != 1 {
				return 0, false, err
			}
		}
		key := w.key()
		ok, err := c.SetNX(ctx, prefix+":c:github:"+key, key, pendingTTL).Result()
		return 0, ok, err
	}, func() { _ = c.Close() }, nil
}

func openThrottled(e *env) (op, func(), error) {
	c := newGoRedis(e)
	store, err := goredisstore.NewCtx(c, "th"+e.run+":")
	if err != nil {
		return nil, nil, err
	}
	l, err := throttled.NewGCRARateLimiterCtx(store, thQuota)
	if err != nil {
		return nil, nil, err
	}
	return func(ctx context.Context, w *worker) (time.Duration, bool, error) {
		limited, _, err := l.RateLimitCtx(ctx, e.tenants[w.next()%uint64(len(e.tenants))], 1)
		if err != nil {
			return 0, false, err
		}
		return 0, !limited, nil
	}, func() { _ = c.Close() }, nil
}

// systemsNamed returns the systems in names (all when names is empty);
// the name postgres stands for every Postgres row.
func systemsNamed(names []string) ([]system, error) {
	if len(names) == 0 {
		return systems, nil
	}
	var out []system
	for _, n := range names {
		found := false
		for _, s := range systems {
			if s.name == n || n == "postgres" && s.pg {
				out = append(out, s)
				found = true
			}
		}
		if !found {
			return nil, errors.New("unknown system " + strconv.Quote(n))
		}
	}
	return out, nil
}
