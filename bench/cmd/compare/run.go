package main

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	goredis "github.com/redis/go-redis/v9"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/bench/internal/cmdstat"
)

// worker is one of a run's concurrent callers. Only its goroutine touches
// it until the run ends.
type worker struct {
	id, conc uint64
	seq      uint64
	prefix   []byte
	buf      []byte
	charges  []fleetstore.Charge

	ops, notOK, errs uint64
	hit, whole       *hdrhistogram.Histogram // ns
	firstErr         error
}

// next returns this worker's next sequence number, spread over the
// workers so that they take tenants in turn.
func (w *worker) next() uint64 {
	w.seq++
	return w.seq*w.conc + w.id
}

// key returns a fresh event key (never used before in this run).
func (w *worker) key() string {
	w.buf = strconv.AppendUint(append(w.buf[:0], w.prefix...), w.seq, 10)
	return string(w.buf)
}

func newHist() *hdrhistogram.Histogram { return hdrhistogram.New(1, int64(time.Minute), 3) }

func record(h *hdrhistogram.Histogram, d time.Duration) {
	_ = h.RecordValue(min(max(int64(d), 1), int64(time.Minute)))
}

// row is one measured line of the table.
type row struct {
	System      string  `json:"system"`
	Concurrency int     `json:"concurrency"`
	OpsPerSec   float64 `json:"ops_per_sec"`
	P50us       float64 `json:"p50_us"`
	P99us       float64 `json:"p99_us"`
	HookP50us   float64 `json:"hook_p50_us,omitempty"` // hook rows: Hit + Commit
	HookP99us   float64 `json:"hook_p99_us,omitempty"` // hook rows: Hit + Commit
	ServerCPUus float64 `json:"server_cpu_us_per_op"`  // redis-server user+sys CPU per op
	// EVALSHA + EVAL + FCALL per op (commandstats); nil when a read failed
	ScriptCalls *float64 `json:"script_calls_per_op,omitempty"`
	ClientCPUus float64  `json:"client_cpu_us_per_op"`  // this process's user+sys CPU per op
	Allocs      float64  `json:"client_allocs_per_op"`  // this process's heap allocations per op
	Ops         uint64   `json:"ops"`                   // ops in the measured window
	NotOK       uint64   `json:"not_ok"`                // answers other than allowed/OK
	Errors      uint64   `json:"errors"`                // error values
	Server      string   `json:"server,omitempty"`      // memory rows: the server they ran on
	Bytes       float64  `json:"bytes,omitempty"`       // memory rows: bytes per item
	Items       int      `json:"items,omitempty"`       // memory rows: items written
	Seconds     float64  `json:"seconds,omitempty"`     // measured window, s
	Error       string   `json:"first_error,omitempty"` // the first error seen
	// -server-stats: commandstats of each round
	Scripts string `json:"server_commands,omitempty"`
}

// runConfig is what every run shares.
type runConfig struct {
	warmup, duration time.Duration
	pool             int
	timeout          time.Duration
	tenants          int
	serverStats      bool
	pgPool           int // the Postgres rows' pool
}

// measure runs sys with conc workers for cfg.warmup, then counts and
// times it for cfg.duration.
func measure(ctx context.Context, on target, sys system, conc int, cfg runConfig) (*sample, error) {
	run := runID()
	if sys.external != nil {
		return measureExternal(ctx, on, sys, conc, cfg, run)
	}
	e := &env{addr: on.addrs[0], run: run, pool: cfg.pool, timeout: cfg.timeout}
	if sys.pg {
		e.pool = cfg.pgPool
	}
	if len(on.addrs) > 1 {
		e.nodes = on.addrs
	}
	e.tenants = make([]string, cfg.tenants)
	for i := range e.tenants {
		e.tenants[i] = "t-" + run + "-" + strconv.Itoa(i)
	}
	do, closeSys, err := sys.open(e)
	if err != nil {
		return nil, fmt.Errorf("%s: open: %w", sys.name, err)
	}
	defer closeSys()

	var measuring, stop atomic.Bool
	workers := make([]*worker, conc)
	var wg sync.WaitGroup
	for i := range workers {
		prefix := []byte("evt-" + run + "-" + strconv.Itoa(i) + "-")
		w := &worker{id: uint64(i), conc: uint64(conc), prefix: prefix,
			hit: newHist(), whole: newHist()}
		w.charges = []fleetstore.Charge{
			{Kind: fleetstore.Hooks, Increment: fsIncrement, Capacity: fsCapacity},
			{Kind: fleetstore.Bytes, Increment: fsIncrement, Capacity: fsCapacity},
		}
		if sys.quota {
			w.charges = append(w.charges, monthQuota.Charge("", 1))
		}
		workers[i] = w
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() && ctx.Err() == nil {
				t0 := time.Now()
				hit, ok, err := do(ctx, w)
				d := time.Since(t0)
				if !measuring.Load() {
					continue
				}
				if err != nil {
					// An error is not a decision: it counts in no rate and
					// no latency (a fast failure would flatter the row).
					w.errs++
					if w.firstErr == nil {
						w.firstErr = err
					}
					continue
				}
				w.ops++
				if !ok {
					w.notOK++
				}
				if hit == 0 {
					hit = d
				}
				record(w.hit, hit)
				record(w.whole, d)
			}
		}()
	}
	sleep(ctx, cfg.warmup)
	if cfg.serverStats {
		on.resetStats(ctx)
	}
	srv0, _ := on.serverCPU(ctx)
	calls0, err0 := on.scriptCalls(ctx)
	cli0 := clientCPU()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	mallocs0 := ms.Mallocs
	t0 := time.Now()
	measuring.Store(true)
	sleep(ctx, cfg.duration)
	measuring.Store(false)
	elapsed := time.Since(t0)
	cli1 := clientCPU()
	runtime.ReadMemStats(&ms)
	mallocs1 := ms.Mallocs
	srv1, _ := on.serverCPU(ctx)
	calls1, err1 := on.scriptCalls(ctx)
	var cmdstats string
	if cfg.serverStats {
		cmdstats = on.commandStats(ctx)
	}
	stop.Store(true)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	sm := &sample{system: sys.name, concurrency: conc, hook: sys.hook, run: run, elapsed: elapsed,
		serverCPU: srv1 - srv0, clientCPU: cli1 - cli0, mallocs: mallocs1 - mallocs0, cmdstats: cmdstats,
		scripts: calls1 - calls0, scriptsKnown: err0 == nil && err1 == nil,
		hit: newHist(), whole: newHist()}
	for _, w := range workers {
		sm.ops += w.ops
		sm.notOK += w.notOK
		sm.errs += w.errs
		if w.firstErr != nil && sm.firstErr == nil {
			sm.firstErr = w.firstErr
		}
		sm.hit.Merge(w.hit)
		sm.whole.Merge(w.whole)
	}
	return sm, nil
}

// sample is one measured run of one row.
type sample struct {
	system       string
	concurrency  int
	hook         bool
	run          string // the run id in every key the run wrote
	elapsed      time.Duration
	ops          uint64
	notOK, errs  uint64
	firstErr     error
	hit, whole   *hdrhistogram.Histogram
	serverCPU    time.Duration
	clientCPU    time.Duration
	mallocs      uint64
	scripts      int64 // script calls the server counted in the window
	scriptsKnown bool  // both counts were read
	cmdstats     string
}

// summarize pools a row's samples (its rounds): ops and time add up,
// latencies merge into one histogram, so that every round weighs by what
// it measured.
func summarize(samples []*sample) row {
	first := samples[0]
	r := row{System: first.system, Concurrency: first.concurrency}
	hit, whole := newHist(), newHist()
	var elapsed, srv, cli time.Duration
	var mallocs uint64
	var scripts int64
	scriptsKnown := true
	var stats []string
	for _, sm := range samples {
		r.Ops += sm.ops
		r.NotOK += sm.notOK
		r.Errors += sm.errs
		if sm.firstErr != nil && r.Error == "" {
			r.Error = sm.firstErr.Error()
		}
		hit.Merge(sm.hit)
		whole.Merge(sm.whole)
		elapsed += sm.elapsed
		srv += sm.serverCPU
		cli += sm.clientCPU
		mallocs += sm.mallocs
		scripts += sm.scripts
		scriptsKnown = scriptsKnown && sm.scriptsKnown
		if sm.cmdstats != "" {
			stats = append(stats, sm.cmdstats)
		}
	}
	r.Scripts = strings.Join(stats, " | ")
	r.Seconds = round1(elapsed.Seconds())
	r.OpsPerSec = float64(int64(float64(r.Ops)/elapsed.Seconds() + 0.5))
	r.P50us = us(hit.ValueAtQuantile(50))
	r.P99us = us(hit.ValueAtQuantile(99))
	if first.hook {
		r.HookP50us = us(whole.ValueAtQuantile(50))
		r.HookP99us = us(whole.ValueAtQuantile(99))
	}
	if r.Ops > 0 {
		r.ServerCPUus = round1(srv.Seconds() * 1e6 / float64(r.Ops))
		r.ClientCPUus = round1(cli.Seconds() * 1e6 / float64(r.Ops))
		r.Allocs = round1(float64(mallocs) / float64(r.Ops))
		if scriptsKnown {
			v := float64(scripts) / float64(r.Ops)
			r.ScriptCalls = &v
		}
	}
	return r
}

func us(ns int64) float64 { return round1(float64(ns) / 1e3) }

func round1(v float64) float64 { return float64(int64(v*10+0.5)) / 10 }

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// measureExternal runs a row whose command measures itself (pgbench):
// no warm-up, the server's CPU and statements counted around it.
func measureExternal(ctx context.Context, on target, sys system, conc int, cfg runConfig,
	run string) (*sample, error) {
	if cfg.serverStats {
		on.resetStats(ctx)
	}
	srv0, _ := on.serverCPU(ctx)
	calls0, err0 := on.scriptCalls(ctx)
	ops, elapsed, err := sys.external(ctx, on.pg, conc, cfg.warmup, cfg.duration)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", sys.name, err)
	}
	srv1, _ := on.serverCPU(ctx)
	calls1, err1 := on.scriptCalls(ctx)
	var cmdstats string
	if cfg.serverStats {
		cmdstats = on.commandStats(ctx)
	}
	return &sample{system: sys.name, concurrency: conc, run: run, elapsed: elapsed, ops: ops,
		serverCPU: srv1 - srv0, scripts: calls1 - calls0, scriptsKnown: err0 == nil && err1 == nil,
		cmdstats: cmdstats, hit: newHist(), whole: newHist()}, nil
}

// target is the servers a row runs on: one, or a cluster's masters, or
// the Postgres rows' cluster (pg).
type target struct {
	addrs  []string
	admins []*goredis.Client
	pg     *pgServer
}

// resetStats resets the servers' command statistics (-server-stats).
func (t target) resetStats(ctx context.Context) {
	if t.pg != nil {
		t.pg.resetStats(ctx)
	}
	for _, a := range t.admins {
		_ = a.ConfigResetStat(ctx).Err()
	}
}

// serverCPU is the servers' CPU time, summed.
func (t target) serverCPU(ctx context.Context) (time.Duration, error) {
	if t.pg != nil {
		return t.pg.cpu()
	}
	var sum time.Duration
	for _, a := range t.admins {
		d, err := serverCPU(ctx, a)
		if err != nil {
			return 0, err
		}
		sum += d
	}
	return sum, nil
}

// scriptCalls is the servers' script calls, summed; on Postgres, the
// top-level statements (pg_stat_statements).
func (t target) scriptCalls(ctx context.Context) (int64, error) {
	if t.pg != nil {
		return t.pg.statements(ctx)
	}
	var sum int64
	for _, a := range t.admins {
		n, err := scriptCalls(ctx, a)
		if err != nil {
			return 0, err
		}
		sum += n
	}
	return sum, nil
}

// commandStats is each server's commandStats, "; " apart.
func (t target) commandStats(ctx context.Context) string {
	if t.pg != nil {
		return t.pg.topStatements(ctx)
	}
	var parts []string
	for _, a := range t.admins {
		s, _ := commandStats(ctx, a)
		parts = append(parts, s)
	}
	return strings.Join(parts, " / ")
}

// serverCPU returns the server's user + sys CPU time (INFO cpu).
func serverCPU(ctx context.Context, admin *goredis.Client) (time.Duration, error) {
	info, err := admin.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, err
	}
	var total float64
	for _, field := range []string{"used_cpu_user", "used_cpu_sys"} {
		v, err := infoField(info, field)
		if err != nil {
			return 0, err
		}
		total += v
	}
	return time.Duration(total * float64(time.Second)), nil
}

// infoField reads one numeric field of an INFO reply.
func infoField(info, field string) (float64, error) {
	for line := range strings.SplitSeq(info, "\n") {
		name, value, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && name == field {
			return strconv.ParseFloat(value, 64)
		}
	}
	return 0, fmt.Errorf("INFO has no %s", field)
}

// scriptCalls is how many script calls (EVALSHA, EVAL, FCALL) the server
// has counted since its stats were last reset.
func scriptCalls(ctx context.Context, admin *goredis.Client) (int64, error) {
	info, err := admin.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, err
	}
	var n int64
	for _, c := range cmdstat.Parse(info) {
		if c.Name == "evalsha" || c.Name == "eval" || c.Name == "fcall" {
			v, err := strconv.ParseInt(c.Calls, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("commandstats %s calls=%q: %w", c.Name, c.Calls, err)
			}
			n += v
		}
	}
	return n, nil
}

// commandStats summarises INFO commandstats: each command's calls and
// µs per call, busiest first as the server lists them.
func commandStats(ctx context.Context, admin *goredis.Client) (string, error) {
	info, err := admin.Info(ctx, "commandstats").Result()
	if err != nil {
		return "", err
	}
	var parts []string
	for _, c := range cmdstat.Parse(info) {
		parts = append(parts, c.Name+" calls="+c.Calls+" usec_per_call="+c.UsecPerCall)
	}
	return strings.Join(parts, "; "), nil
}
