package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fleetstore/fleetstore"
	_ "github.com/fleetstore/fleetstore/drivers/postgres"
	"github.com/fleetstore/fleetstore/gcra"
	"github.com/fleetstore/fleetstore/internal/testing/testserver"
)

// pgServer is the PostgreSQL cluster the Postgres rows run on, started
// for them (testserver.LaunchPostgres: initdb in a temp dir, fsync off,
// a free loopback port), with pg_stat_statements loaded and pgbench's
// tables initialised.
type pgServer struct {
	srv     *testserver.Postgres
	admin   *pgxpool.Pool
	url     string
	version string
}

// pgbenchScale is pgbench -i's scale: 1 000 000 accounts. pgbench -N
// updates no tellers or branches, so the scale only sets how rarely two
// clients update one account.
const pgbenchScale = 10

// pgxJobSchema is the pgx-job row's tables, as a user would create them.
const pgxJobSchema = `
CREATE SCHEMA pgxjob;
CREATE TABLE pgxjob.buckets (
	tenant text NOT NULL,
	kind text NOT NULL,
	tat bigint NOT NULL,
	PRIMARY KEY (tenant, kind)
);
CREATE TABLE pgxjob.claims (
	tenant text NOT NULL,
	source text NOT NULL,
	key text NOT NULL,
	hook_id text NOT NULL,
	committed boolean NOT NULL,
	expires_at timestamptz NOT NULL,
	PRIMARY KEY (tenant, source, key)
);`

// startPostgres starts the cluster. Its error wraps
// testserver.ErrNoPostgres when PostgreSQL is not installed.
func startPostgres(ctx context.Context) (_ *pgServer, err error) {
	srv, err := testserver.LaunchPostgres(testserver.PostgresConfig{DieWithParent: true,
		Settings: []string{"shared_preload_libraries=pg_stat_statements", "pg_stat_statements.track=top"}})
	if err != nil {
		return nil, err
	}
	p := &pgServer{srv: srv, url: "postgres://fleet@" + srv.Addr + "/postgres?sslmode=disable"}
	defer func() {
		if err != nil {
			p.close()
		}
	}()
	if p.admin, err = pgxpool.New(ctx, p.url); err != nil {
		return nil, err
	}
	for _, q := range []string{"CREATE EXTENSION pg_stat_statements", pgxJobSchema} {
		if _, err := p.admin.Exec(ctx, q); err != nil {
			return nil, fmt.Errorf("postgres: %w", err)
		}
	}
	if err := p.admin.QueryRow(ctx, "SHOW server_version").Scan(&p.version); err != nil {
		return nil, err
	}
	p.version = "PostgreSQL " + strings.Fields(p.version)[0]
	host, port, _ := strings.Cut(srv.Addr, ":")
	cmd := exec.CommandContext(ctx, p.pgbench(), "-i", "-q", "-s", strconv.Itoa(pgbenchScale),
		"-h", host, "-p", port, "-U", "fleet", "postgres")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("pgbench -i: %v\n%s", err, out)
	}
	return p, nil
}

// pgbench is the path of pgbench, found beside the server's binaries.
func (p *pgServer) pgbench() string { return filepath.Join(p.srv.BinDir(), "pgbench") }

func (p *pgServer) close() {
	if p.admin != nil {
		p.admin.Close()
	}
	_ = p.srv.Close()
}

// clean empties the tables a row wrote (fleetstore's and pgx-job's),
// so that the next row starts on empty ones.
func (p *pgServer) clean(ctx context.Context) error {
	_, err := p.admin.Exec(ctx, "TRUNCATE fleetstore.buckets_v1, fleetstore.claims_v1, fleetstore.windows_v1, "+
		"pgxjob.buckets, pgxjob.claims")
	var missing interface{ SQLState() string }
	if errors.As(err, &missing) && missing.SQLState() == "3F000" || errors.As(err, &missing) &&
		missing.SQLState() == "42P01" {
		return nil // no fleetstore row ran yet: its schema is not installed
	}
	return err
}

// cpu is the server's CPU time: user + sys of the postmaster and of its
// running backends and workers, plus what its exited children used
// (/proc/PID/stat utime, stime; cutime, cstime of the postmaster).
func (p *pgServer) cpu() (time.Duration, error) {
	var ticks int64
	for i, pid := range p.srv.Processes() {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			continue // a backend that just exited: its time is in cutime now
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		fields := []int{11, 12} // utime, stime (fields 14, 15)
		if i == 0 {
			fields = append(fields, 13, 14) // cutime, cstime
		}
		for _, k := range fields {
			if k < len(f) {
				n, _ := strconv.ParseInt(f[k], 10, 64)
				ticks += n
			}
		}
	}
	return time.Duration(ticks) * (time.Second / 100), nil // USER_HZ is 100 on Linux
}

// statements is how many top-level statements the server ran
// (pg_stat_statements), these counting queries left out.
func (p *pgServer) statements(ctx context.Context) (int64, error) {
	var n int64
	err := p.admin.QueryRow(ctx, "SELECT coalesce(sum(calls), 0)::bigint FROM pg_stat_statements "+
		"WHERE query NOT LIKE '%pg_stat_statements%'").Scan(&n)
	return n, err
}

// resetStats empties pg_stat_statements (-server-stats).
func (p *pgServer) resetStats(ctx context.Context) {
	_, _ = p.admin.Exec(ctx, "SELECT pg_stat_statements_reset()")
}

var spaces = regexp.MustCompile(`\s+`)

// topStatements summarises pg_stat_statements: the busiest statements'
// calls and mean execution time in µs.
func (p *pgServer) topStatements(ctx context.Context) string {
	rows, err := p.admin.Query(ctx, "SELECT calls, mean_exec_time, query FROM pg_stat_statements "+
		"WHERE query NOT LIKE '%pg_stat_statements%' ORDER BY calls DESC LIMIT 8")
	if err != nil {
		return err.Error()
	}
	defer rows.Close()
	var parts []string
	for rows.Next() {
		var calls int64
		var mean float64
		var q string
		if err := rows.Scan(&calls, &mean, &q); err != nil {
			return err.Error()
		}
		q = spaces.ReplaceAllString(q, " ")
		if len(q) > 60 {
			q = q[:60] + "…"
		}
		parts = append(parts, fmt.Sprintf("%q calls=%d usec_per_call=%.1f", q, calls, mean*1000))
	}
	return strings.Join(parts, "; ")
}

// pgURL is the URL of a Store of the Postgres rows: the run's key
// prefix, the pool of -pg-pool connections.
func pgURL(e *env) string {
	return fmt.Sprintf("postgres://fleet@%s/postgres?sslmode=disable&timeout=%s&key_prefix=fs%s&pool_max_conns=%d",
		e.addr, e.timeout, e.run, e.pool)
}

// openPgxJob does a Hit's and a Commit's job as a user would write it
// plainly with pgx and its pool (statements prepared and cached, pgx's
// default): a transaction that locks the tenant's two buckets (SELECT …
// FOR UPDATE), decides in Go (GCRA, the gcra package) on this process's
// clock, writes both buckets and inserts the pending claim (INSERT … ON
// CONFLICT, an expired claim taken over); then the Commit's UPDATE,
// fenced by the hook id. Seven statements, each a round trip.
func openPgxJob(e *env) (op, func(), error) {
	cfg, err := pgxpool.ParseConfig(fmt.Sprintf("postgres://fleet@%s/postgres?sslmode=disable&pool_max_conns=%d",
		e.addr, e.pool))
	if err != nil {
		return nil, nil, err
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, nil, err
	}
	kinds := []string{"hooks", "bytes"}
	inc, capacity := fsIncrement.Microseconds(), fsCapacity.Microseconds()
	return func(ctx context.Context, w *worker) (time.Duration, bool, error) {
		tenant := e.tenants[w.next()%uint64(len(e.tenants))]
		key := w.key()
		t0 := time.Now()
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, "SELECT kind, tat FROM pgxjob.buckets "+
				"WHERE tenant = $1 AND kind = ANY($2) FOR UPDATE", tenant, kinds)
			if err != nil {
				return err
			}
			tats := map[string]int64{}
			var kind string
			var tat int64
			_, err = pgx.ForEachRow(rows, []any{&kind, &tat}, func() error { tats[kind] = tat; return nil })
			if err != nil {
				return err
			}
			now := time.Now().UnixMicro()
			for _, k := range kinds {
				d := gcra.Charge(now, tats[k], inc, capacity)
				if !d.Conform {
					return errDenied
				}
				tats[k] = d.TAT
			}
			for _, k := range kinds {
				if _, err := tx.Exec(ctx, "INSERT INTO pgxjob.buckets (tenant, kind, tat) VALUES ($1, $2, $3) "+
					"ON CONFLICT (tenant, kind) DO UPDATE SET tat = excluded.tat", tenant, k, tats[k]); err != nil {
					return err
				}
			}
			tag, err := tx.Exec(ctx, "INSERT INTO pgxjob.claims "+
				"(tenant, source, key, hook_id, committed, expires_at) "+
				"VALUES ($1, 'github', $2, $3, false, now() + $4 * interval '1 microsecond') "+
				"ON CONFLICT (tenant, source, key) DO UPDATE SET hook_id = excluded.hook_id, "+
				"committed = false, expires_at = excluded.expires_at "+
				"WHERE pgxjob.claims.expires_at <= now()", tenant, key, key, pendingTTL.Microseconds())
			if err != nil {
				return err
			}
			if tag.RowsAffected() == 0 {
				return errDenied // a duplicate
			}
			return nil
		})
		hit := time.Since(t0)
		if errors.Is(err, errDenied) {
			return hit, false, nil
		}
		if err != nil {
			return hit, false, err
		}
		tag, err := pool.Exec(ctx, "UPDATE pgxjob.claims SET committed = true, "+
			"expires_at = now() + $4 * interval '1 microsecond' "+
			"WHERE tenant = $1 AND source = 'github' AND key = $2 AND hook_id = $3 AND NOT committed "+
			"AND expires_at > now()", tenant, key, key, claimTTL.Microseconds())
		if err != nil {
			return hit, false, err
		}
		return hit, tag.RowsAffected() == 1, nil
	}, pool.Close, nil
}

var errDenied = errors.New("denied")

// runPgbench runs pgbench -N (TPC-B without the tellers' and branches'
// updates: one account updated, one read, one history row per
// transaction) with conc clients on the row's server. pgbench's -T counts
// its connections too (64 forked backends take a second on a loaded
// machine): it runs the row's warm-up and duration rounded up to whole
// seconds, plus one. It reports the transactions pgbench processed and
// the seconds they took, its connections excluded (transactions ÷ its
// "tps without initial connection time").
func runPgbench(ctx context.Context, p *pgServer, conc int, warmup, d time.Duration) (uint64, time.Duration, error) {
	secs := int(math.Ceil((warmup + d).Seconds())) + 1
	host, port, _ := strings.Cut(p.srv.Addr, ":")
	cmd := exec.CommandContext(ctx, p.pgbench(), "-N", "-n", "-c", strconv.Itoa(conc),
		"-j", strconv.Itoa(min(conc, runtime.NumCPU())), "-T", strconv.Itoa(secs),
		"-h", host, "-p", port, "-U", "fleet", "postgres")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, 0, fmt.Errorf("pgbench: %v\n%s", err, out)
	}
	return parsePgbench(out)
}

// parsePgbench reads pgbench's report: the transactions it processed and
// the seconds they took (transactions ÷ its tps without initial
// connection time).
func parsePgbench(out []byte) (uint64, time.Duration, error) {
	tps := pgbenchTPS.FindSubmatch(out)
	done := pgbenchDone.FindSubmatch(out)
	if tps == nil || done == nil {
		return 0, 0, fmt.Errorf("pgbench: no tps in its output:\n%s", out)
	}
	rate, err1 := strconv.ParseFloat(string(tps[1]), 64)
	n, err2 := strconv.ParseUint(string(done[1]), 10, 64)
	if err := errors.Join(err1, err2); err != nil || rate <= 0 || n == 0 {
		return 0, 0, fmt.Errorf("pgbench: tps %q, transactions %q: %v", tps[1], done[1], err)
	}
	return n, time.Duration(float64(n) / rate * float64(time.Second)), nil
}

var (
	pgbenchTPS  = regexp.MustCompile(`tps = ([0-9.]+) \(without initial connection time\)`)
	pgbenchDone = regexp.MustCompile(`number of transactions actually processed: ([0-9]+)`)
)

// pgDiskPerClaim commits items claims (the memory rows' shape, 72 h TTL)
// through a Store on p, and returns the growth of the claims table's size
// on disk, its index included, after VACUUM, per claim.
func pgDiskPerClaim(ctx context.Context, p *pgServer, items int, timeout time.Duration) (row, error) {
	run := runID()
	st, err := fleetstore.Open(fmt.Sprintf("%s&timeout=%s&key_prefix=fsdisk%s&pool_max_conns=8", p.url,
		timeout, run))
	if err != nil {
		return row{}, err
	}
	defer st.Close()
	// The schema is installed on first contact: one Hit before the size.
	first := memClaim(run, items, memClaimTTL)
	if _, err := st.Hit(ctx, nil, &first); err != nil {
		return row{}, fmt.Errorf("postgres disk: %w", err)
	}
	size := func() (int64, error) {
		if _, err := p.admin.Exec(ctx, "VACUUM fleetstore.claims_v1"); err != nil {
			return 0, err
		}
		var n int64
		err := p.admin.QueryRow(ctx, "SELECT pg_total_relation_size('fleetstore.claims_v1')").Scan(&n)
		return n, err
	}
	before, err := size()
	if err != nil {
		return row{}, err
	}
	err = parallel(ctx, items, 16, func(i int) error {
		c := memClaim(run, i, memClaimTTL)
		res, err := st.Hit(ctx, nil, &c)
		if err != nil {
			return err
		}
		if res.Outcome != fleetstore.OK {
			return fmt.Errorf("claim %d: outcome %v", i, res.Outcome)
		}
		return st.Commit(ctx, c)
	})
	if err != nil {
		return row{}, fmt.Errorf("postgres disk: %w", err)
	}
	after, err := size()
	if err != nil {
		return row{}, err
	}
	return row{System: "disk_per_claim", Server: p.version, Items: items,
		Bytes: round1(float64(after-before) / float64(items))}, nil
}
