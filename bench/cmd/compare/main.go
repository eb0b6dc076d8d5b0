// Command compare measures fleetstore's Redis and Valkey drivers side by
// side with what users pick instead — go-redis/redis_rate and throttled's
// GCRA over go-redis — and with a plain PING, the one-round-trip floor,
// against one redis-server, in one run:
//
//	cd bench && go run ./cmd/compare            # or: make compare
//	cd bench && go run ./cmd/compare -json      # one JSON object per row, nothing else
//
// It starts its own redis-server on a free loopback port in a temp dir (no
// persistence) and stops it at exit, unless -addr names a server. For each
// concurrency (-c, default 1 and 64) and each system it runs -warmup, then
// counts and times -d, and prints ops/s, p50 and p99 latency, the
// server's and this process's CPU per op and this process's allocations
// per op; then the ratios of each peer to fleetstore's Hit and the
// project's goals. Limits are generous, so every decision is allowed:
// what is measured is the cost of deciding. Every row uses fresh tenants
// and keys; -rounds N repeats the rows, interleaved, and pools each
// row's rounds, so that a busy spell of a shared machine is spread over
// every system.
//
// The rows:
//
//	ping-go-redis           PING, go-redis v9: the floor of the redis driver and of the peers
//	ping-valkey-go          PING, valkey-go with the valkey driver's settings: its floor
//	script-floor            EVALSHA of "return {1}" with a Hit's KEYS and ARGV:
//	                        the floor of any one-script decision
//	fleetstore-redis-hit    Store.Hit: hooks and bytes charges and a claim on a fresh
//	                        event key, one script call
//	fleetstore-redis-hit-unpipelined
//	                        as fleetstore-redis-hit with pipeline=off: each Hit on its
//	                        own pooled connection
//	fleetstore-redis-hook   the whole hook: Hit, then Commit; ops/s are hooks, p50/p99
//	                        the Hit's, hook p50/p99 both
//	fleetstore-redis-hit-quota, fleetstore-valkey-hit-quota
//	                        as fleetstore-redis-hit with a monthly quota charged
//	                        beside the two buckets (issue 30's goal: its server CPU)
//	fleetstore-valkey-hit   as fleetstore-redis-hit, valkey driver
//	fleetstore-valkey-hook  as fleetstore-redis-hook, valkey driver
//	fleetstore-redis-cluster-hook, fleetstore-valkey-cluster-hook
//	                        as fleetstore-redis-hook, on a cluster of three masters
//	                        started for them (server CPU and script calls summed)
//	redis_rate              redis_rate v10 Allow: one bucket, one script call
//	redis_rate-job          redis_rate doing a Hit's job: two Allow and a SET NX PX
//	                        (three round trips, not all or nothing)
//	throttled               throttled v2 GCRA over its go-redis v9 store: one bucket,
//	                        GET+TIME then a CAS script
//	fleetstore-postgres-hit, fleetstore-postgres-hook
//	                        as fleetstore-redis-hit and -hook, a Store on postgres://
//	pgbench-N               pgbench -N with c clients on the same PostgreSQL server
//	pgx-job                 the hook's job written plainly with pgx: a transaction
//	                        (SELECT … FOR UPDATE of the buckets, GCRA in Go, their
//	                        upserts, INSERT … ON CONFLICT of the claim), then the
//	                        Commit's UPDATE
//
// The Postgres rows run on a PostgreSQL cluster started for them
// (testserver.LaunchPostgres, pg_stat_statements loaded), with pools of
// -pg-pool connections; -postgres=false leaves them out, and they are
// skipped with a warning when PostgreSQL is not installed. -only postgres
// names all four. Their server CPU is the server processes' (/proc), their
// statements per op pg_stat_statements' top-level calls. Before them a
// Store commits -pg-items claims, and the claims table's growth on disk
// after VACUUM, per claim, is shown.
//
// Before the load it measures memory per tenant (the hooks and bytes
// buckets), per committed claim (INFO memory used_memory, less the
// clients' buffers, before and after -items of each) and per live claim
// in steady state (claims on a short TTL, -steady-ttl, committed at
// -steady-rate for three TTLs, so that as many expire as arrive; the
// growth divided by the claims committed within the last TTL), through
// the redis driver, on a server of each of -memory-servers
// (redis-server and valkey-server) started for them, or on -addr's.
//
// Then it prints issue 27's goals, each met or not, as ratios of rows of
// the one run: hooks/s at c=64 ÷ redis_rate's Allow/s (≥ 0.8) and ÷
// redis_rate-job's ops/s (≥ 2.0), server CPU per hook at c=64 ÷ an
// Allow's (≤ 1.2), script calls per hook at c=64 (≤ 0.6), Hit p50 at c=1
// ÷ redis_rate's (≤ 1.3), hook p99 at c=64 ÷ redis_rate's p99 (≤ 1.5),
// the cluster's hooks/s at c=64 (shown) and bytes per committed claim
// (≤ 100). Then issue 13's: Hit ops/s at c=64 ÷ redis_rate's (≥ 1.3), Hit p50 at c=1 ÷
// script-floor's (≤ 1.4), server CPU per Hit at c=64 ÷ redis_rate's
// (≤ 1.2), bytes per committed and per live claim (≤ 100), with the Hit's
// p99 at c=64 beside them; and issue 22's for a Hit alone: p50 at c=1 ÷
// redis_rate's (≤ 1.25), server CPU per Hit at c=1 ÷ script-floor's
// (≤ 1.4).
//
// With -json every row is one object on its own line: system,
// concurrency, ops_per_sec, p50_us, p99_us, and more (see row); the
// memory rows have system memory_per_tenant, memory_per_claim and
// memory_per_live_claim, server, bytes (per item) and items, and zeros in
// the latency fields.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/fleetstore/fleetstore/internal/testing/testserver"
)

type config struct {
	addr, serverBin     string
	concurrency         []int
	only                []string
	run                 runConfig
	items               int
	memServers          []string      // server binaries the memory rows run on, each started for them
	steadyTTL           time.Duration // the steady-state memory row's claim TTL (0: skip it)
	steadyRate          int           // its commits per second
	json, markdown      bool
	cpuProfile, memProf string
	rounds              int
	postgres            bool   // run the Postgres rows
	pgItems             int    // committed claims of the Postgres disk row
	pgVersion           string // the Postgres rows' server, once started
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg config
	var conc, only, memServers string
	fs.StringVar(&cfg.addr, "addr", "",
		"host:port of a running server (default: start redis-server on a free loopback port)")
	fs.StringVar(&cfg.serverBin, "server", "redis-server",
		"server binary to start when -addr is empty (valkey-server works too)")
	fs.StringVar(&conc, "c", "1,64", "concurrencies, comma-separated")
	fs.DurationVar(&cfg.run.duration, "d", 5*time.Second, "measured duration of each row")
	fs.DurationVar(&cfg.run.warmup, "warmup", time.Second,
		"load before each measured duration, not counted")
	fs.IntVar(&cfg.run.pool, "pool", 64, "go-redis pool size, for every go-redis based system alike")
	fs.DurationVar(&cfg.run.timeout, "timeout", time.Second,
		"fleetstore's per-call budget (URL timeout=)")
	fs.IntVar(&cfg.run.tenants, "tenants", 1000, "tenants (buckets) per row, taken in turn")
	fs.IntVar(&cfg.rounds, "rounds", 1,
		"run every row this many times, interleaved, and pool the rounds (-d each)")
	fs.IntVar(&cfg.items, "items", 100_000,
		"tenants and claims written for the memory rows (0: skip them)")
	fs.StringVar(&memServers, "memory-servers", "redis-server,valkey-server",
		"server binaries the memory rows run on, comma-separated, each started for them (with -addr: "+
			"that server only); one not found is skipped with a warning")
	fs.DurationVar(&cfg.steadyTTL, "steady-ttl", 2*time.Second,
		"claim TTL of the steady-state memory row: three TTLs of commits, as many expiring as "+
			"arriving (0: skip it)")
	fs.IntVar(&cfg.steadyRate, "steady-rate", 10_000,
		"commits per second of the steady-state memory row")
	fs.BoolVar(&cfg.postgres, "postgres", true,
		"run the Postgres rows on a PostgreSQL cluster started for them (skipped with a warning when "+
			"PostgreSQL is not installed); -postgres=false leaves them out")
	fs.IntVar(&cfg.run.pgPool, "pg-pool", 4,
		"connections of the Postgres rows' pools (the driver's default pool_max_conns)")
	fs.IntVar(&cfg.pgItems, "pg-items", 20_000,
		"committed claims of the Postgres disk row (0: skip it)")
	fs.StringVar(&only, "only", "", "systems to run, comma-separated (default all; postgres: every Postgres row): "+systemNames())
	fs.BoolVar(&cfg.json, "json", false, "print only one JSON object per row")
	fs.BoolVar(&cfg.markdown, "md", false, "print the table as Markdown")
	fs.BoolVar(&cfg.run.serverStats, "server-stats", false,
		"reset and print INFO commandstats per row (server µs per command)")
	fs.StringVar(&cfg.cpuProfile, "cpuprofile", "",
		"write this process's CPU profile of the whole run to this file")
	fs.StringVar(&cfg.memProf, "memprofile", "",
		"write this process's allocation profile (every 4 KiB sampled) to this file at exit")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: compare [flags]\n\nflags:")
		fs.PrintDefaults()
		fmt.Fprintln(stderr, "\nsystems (rows):")
		for _, s := range systems {
			fmt.Fprintf(stderr, "  %-23s %s\n", s.name, s.about)
		}
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	for f := range strings.SplitSeq(conc, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			fmt.Fprintf(stderr, "compare: -c: want positive integers, got %q\n", conc)
			return 2
		}
		cfg.concurrency = append(cfg.concurrency, n)
	}
	if cfg.rounds < 1 {
		fmt.Fprintln(stderr, "compare: -rounds: want at least 1")
		return 2
	}
	if only != "" {
		cfg.only = strings.Split(only, ",")
	}
	if memServers != "" {
		cfg.memServers = strings.Split(memServers, ",")
	}
	if cfg.steadyRate < memBatch {
		fmt.Fprintf(stderr, "compare: -steady-rate: want at least %d\n", memBatch)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := compare(ctx, cfg, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, "compare:", err)
		return 1
	}
	return 0
}

func systemNames() string {
	names := make([]string, len(systems))
	for i, s := range systems {
		names[i] = s.name
	}
	return strings.Join(names, ",")
}

func compare(ctx context.Context, cfg config, stdout, stderr io.Writer) error {
	sys, err := systemsNamed(cfg.only)
	if err != nil {
		return err
	}
	progress := func(format string, a ...any) {
		if !cfg.json {
			fmt.Fprintf(stderr, format+"\n", a...)
		}
	}
	addr := cfg.addr
	if addr == "" {
		srv, err := startServer(ctx, cfg.serverBin)
		if err != nil {
			return err
		}
		defer srv.close()
		addr = srv.addr
		progress("started %s on %s", cfg.serverBin, addr)
	}
	admin := goredis.NewClient(&goredis.Options{Addr: addr})
	defer admin.Close()
	version, err := serverVersion(ctx, admin)
	if err != nil {
		return fmt.Errorf("%s: %w", addr, err)
	}

	if cfg.cpuProfile != "" {
		f, err := os.Create(cfg.cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}

	if cfg.memProf != "" {
		runtime.MemProfileRate = 4096
		defer func() {
			if err := writeAllocs(cfg.memProf); err != nil {
				fmt.Fprintln(stderr, "compare: memprofile:", err)
			}
		}()
	}

	mem, err := memoryRows(ctx, cfg, admin, version, progress, stderr)
	if err != nil {
		return err
	}

	var onPostgres target
	if cfg.postgres && slices.ContainsFunc(sys, func(s system) bool { return s.pg }) {
		pg, err := startPostgres(ctx)
		switch {
		case errors.Is(err, testserver.ErrNoPostgres):
			fmt.Fprintln(stderr, "compare: warning: no Postgres rows:", err)
		case err != nil:
			return err
		default:
			defer pg.close()
			onPostgres = target{addrs: []string{pg.srv.Addr}, pg: pg}
			cfg.pgVersion = pg.version
			progress("started %s on %s", pg.version, pg.srv.Addr)
			if cfg.pgItems > 0 {
				progress("disk on %s: %d committed claims …", pg.version, cfg.pgItems)
				r, err := pgDiskPerClaim(ctx, pg, cfg.pgItems, cfg.run.timeout)
				if err != nil {
					return err
				}
				mem = append(mem, r)
				if err := pg.clean(ctx); err != nil {
					return err
				}
			}
		}
	}
	if onPostgres.pg == nil {
		sys = slices.DeleteFunc(sys, func(s system) bool { return s.pg })
	}

	one := target{addrs: []string{addr}, admins: []*goredis.Client{admin}}
	var onCluster target
	if slices.ContainsFunc(sys, func(s system) bool { return s.cluster }) {
		if cfg.addr != "" {
			return errors.New("the cluster rows start their own cluster: leave them out with -only when -addr is set")
		}
		cl, err := startCluster(ctx, cfg.serverBin)
		if err != nil {
			return err
		}
		defer cl.close()
		onCluster = target{addrs: cl.addrs(), admins: cl.admins}
		progress("started a cluster of %s on %s", cfg.serverBin, strings.Join(cl.addrs(), " "))
	}

	// Every round runs every row once; rounds interleave, so that a slow
	// spell of the machine does not fall on one system only. Each row
	// pools its rounds.
	byRow := map[string][]*sample{}
	for round := 1; round <= cfg.rounds; round++ {
		for _, c := range cfg.concurrency {
			for _, s := range sys {
				progress("round %d/%d  %-24s c=%-3d …", round, cfg.rounds, s.name, c)
				on := one
				switch {
				case s.cluster:
					on = onCluster
				case s.pg:
					on = onPostgres
				}
				sm, err := measure(ctx, on, s, c, cfg.run)
				if err != nil {
					return err
				}
				if sm.errs > 0 {
					fmt.Fprintf(stderr, "compare: %s c=%d: %d errors, the first: %v\n", s.name, c, sm.errs,
						sm.firstErr)
				}
				// The next row starts on an empty keyspace: the keys a row
				// wrote would otherwise expire during later rows and charge
				// them for it. A server of our own is flushed; on -addr only
				// this row's keys (each holds its run id) are deleted.
				switch {
				case s.pg:
					err = on.pg.clean(ctx)
				case cfg.addr == "":
					for _, a := range on.admins {
						if err = a.FlushAll(ctx).Err(); err != nil {
							break
						}
					}
				default:
					err = deleteMatching(ctx, admin, "*"+sm.run+"*")
				}
				if err != nil {
					return fmt.Errorf("clean up after %s: %w", s.name, err)
				}
				k := s.name + "/" + strconv.Itoa(c)
				byRow[k] = append(byRow[k], sm)
			}
		}
	}
	var rows []row
	for _, c := range cfg.concurrency {
		for _, s := range sys {
			r := summarize(byRow[s.name+"/"+strconv.Itoa(c)])
			rows = append(rows, r)
			if cfg.json {
				if err := json.NewEncoder(stdout).Encode(r); err != nil {
					return err
				}
			}
		}
	}
	if cfg.json {
		enc := json.NewEncoder(stdout)
		for _, r := range mem {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
	} else {
		printReport(stdout, rows, mem, cfg, version)
	}
	return failedRows(rows)
}

// failedRows is an error naming the rows whose calls failed: their ops/s
// and latencies count the successful calls only, so neither they nor the
// ratios and goals built on them are a measurement.
func failedRows(rows []row) error {
	var bad []string
	for _, r := range rows {
		if r.Errors > 0 {
			bad = append(bad, fmt.Sprintf("%s c=%d (%d errors)", r.System, r.Concurrency, r.Errors))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return fmt.Errorf("calls failed in %s: those rows, their ratios and the goals are not valid",
		strings.Join(bad, ", "))
}

// memoryRows runs the memory rows on cfg.addr's server, or on a server
// of each of cfg.memServers started for them (one not installed is
// skipped with a warning).
func memoryRows(ctx context.Context, cfg config, admin *goredis.Client, version string,
	progress func(string, ...any), stderr io.Writer) ([]row, error) {
	if cfg.items <= 0 && cfg.steadyTTL <= 0 {
		return nil, nil
	}
	one := func(admin *goredis.Client, addr, version string) ([]row, error) {
		// The steady state first: the other rows' keys are deleted
		// in the background (UNLINK), which would lower used_memory
		// while it runs.
		var rows []row
		if cfg.steadyTTL > 0 {
			progress("memory on %s: steady state, %d claims/s for 3 × %v …", version, cfg.steadyRate,
				cfg.steadyTTL)
			r, err := steadyMemory(ctx, admin, addr, cfg.steadyTTL, cfg.steadyRate, cfg.run.timeout)
			if err != nil {
				return nil, err
			}
			rows = append(rows, r)
		}
		if cfg.items > 0 {
			progress("memory on %s: %d tenants, %d committed claims …", version, cfg.items, cfg.items)
			got, warning, err := measureMemory(ctx, admin, addr, cfg.items, cfg.run.timeout)
			if err != nil {
				return nil, err
			}
			if warning != nil {
				fmt.Fprintln(stderr, "compare: warning:", warning)
			}
			rows = append(got, rows...)
		}
		for i := range rows {
			rows[i].Server = version
		}
		return rows, nil
	}
	if cfg.addr != "" {
		return one(admin, cfg.addr, version)
	}
	var rows []row
	for _, bin := range cfg.memServers {
		bin = strings.TrimSpace(bin)
		if _, err := exec.LookPath(bin); err != nil {
			fmt.Fprintf(stderr, "compare: warning: %s not found: no memory rows on it\n", bin)
			continue
		}
		srv, err := startServer(ctx, bin)
		if err != nil {
			return nil, err
		}
		got, err := func() ([]row, error) {
			defer srv.close()
			a := goredis.NewClient(&goredis.Options{Addr: srv.addr})
			defer a.Close()
			v, err := serverVersion(ctx, a)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", srv.addr, err)
			}
			return one(a, srv.addr, v)
		}()
		if err != nil {
			return nil, err
		}
		rows = append(rows, got...)
	}
	return rows, nil
}

func writeAllocs(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// serverVersion returns e.g. "redis-server 7.0.15" from INFO server
// (valkey also reports a redis_version: its own comes first).
func serverVersion(ctx context.Context, admin *goredis.Client) (string, error) {
	info, err := admin.Info(ctx, "server").Result()
	if err != nil {
		return "", err
	}
	fields := map[string]string{}
	for line := range strings.SplitSeq(info, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			fields[k] = v
		}
	}
	if v, ok := fields["valkey_version"]; ok {
		return "valkey-server " + v, nil
	}
	return "redis-server " + fields["redis_version"], nil
}
