package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode/utf8"
)

// printReport prints the machine, the table, the memory rows, the ratios
// of each peer to fleetstore and the goals.
func printReport(w io.Writer, rows, mem []row, cfg config, version string) {
	fmt.Fprintf(w,
		"%s; %d interleaved round(s) of %v per row after %v warm-up; "+
			"go-redis pool %d; %d tenants per row\n",
		version, cfg.rounds, cfg.run.duration, cfg.run.warmup, cfg.run.pool, cfg.run.tenants)
	fmt.Fprintf(w, "%s, %s %s/%s, %d CPUs (GOMAXPROCS %d), load average %s\n\n",
		cpuModel(), runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(),
		runtime.GOMAXPROCS(0), loadAverage())
	if cfg.pgVersion != "" {
		fmt.Fprintf(w, "Postgres rows: %s started for them (fsync off, pg_stat_statements); pools of %d "+
			"connections; pgbench -N at scale %d\n\n", cfg.pgVersion, cfg.run.pgPool, pgbenchScale)
	}

	head := []string{"system", "c", "ops/s", "p50 µs", "p99 µs", "hook p50 µs", "hook p99 µs",
		"server CPU µs/op", "client CPU µs/op", "client allocs/op", "not OK", "errors"}
	var lines [][]string
	for _, r := range rows {
		hook50, hook99 := "", ""
		if r.HookP50us > 0 {
			hook50, hook99 = num(r.HookP50us), num(r.HookP99us)
		}
		lines = append(lines, []string{r.System, strconv.Itoa(r.Concurrency),
			strconv.FormatFloat(r.OpsPerSec, 'f', 0, 64), num(r.P50us), num(r.P99us), hook50, hook99,
			num(r.ServerCPUus), num(r.ClientCPUus), num(r.Allocs),
			strconv.FormatUint(r.NotOK, 10), strconv.FormatUint(r.Errors, 10)})
	}
	table(w, head, lines, cfg.markdown)

	if len(mem) > 0 {
		fmt.Fprintln(w)
		for _, m := range mem {
			switch m.System {
			case "memory_per_tenant":
				fmt.Fprintf(w, "%s memory per tenant (hooks + bytes buckets): %s bytes "+
					"(used_memory growth over %d)\n", m.Server, num(m.Bytes), m.Items)
			case "memory_per_claim":
				fmt.Fprintf(w, "%s memory per committed claim (72 h TTL; 36-byte key, "+
					"26-byte hook id): %s bytes (used_memory growth over %d)\n",
					m.Server, num(m.Bytes), m.Items)
			case "memory_per_live_claim":
				fmt.Fprintf(w, "%s memory per live claim in steady state (commits expiring "+
					"as fast as they arrive, %.1fs of them): %s bytes "+
					"(used_memory growth over %d live)\n", m.Server, m.Seconds, num(m.Bytes), m.Items)
			}
		}
	}

	printRatios(w, rows, cfg.markdown)
	printGoals(w, rows, mem, cfg.markdown)
	printGoalsPostgres(w, rows, mem, cfg.markdown)
	for _, r := range rows {
		if r.Scripts != "" {
			fmt.Fprintf(w, "\nserver %s c=%d: %s", r.System, r.Concurrency, r.Scripts)
		}
	}
	fmt.Fprintln(w)
}

// printRatios prints, for every system that is not fleetstore's, its
// ops/s and p50 divided by fleetstore's Hit rows at the same concurrency.
func printRatios(w io.Writer, rows []row, markdown bool) {
	var refs []string
	for _, name := range []string{"fleetstore-redis-hit", "fleetstore-valkey-hit"} {
		for _, r := range rows {
			if r.System == name {
				refs = append(refs, name)
				break
			}
		}
	}
	head := []string{"peer", "c"}
	for _, ref := range refs {
		head = append(head, "ops/s ÷ "+ref, "p50 ÷ "+ref)
	}
	var lines [][]string
	for _, r := range rows {
		if strings.HasPrefix(r.System, "fleetstore-") {
			continue
		}
		line := []string{r.System, strconv.Itoa(r.Concurrency)}
		any := false
		for _, name := range refs {
			ref, ok := find(rows, name, r.Concurrency)
			if !ok || ref.OpsPerSec == 0 || ref.P50us == 0 {
				line = append(line, "", "")
				continue
			}
			any = true
			line = append(line, ratio(r.OpsPerSec/ref.OpsPerSec), ratio(r.P50us/ref.P50us))
		}
		if any {
			lines = append(lines, line)
		}
	}
	if len(lines) == 0 {
		return
	}
	fmt.Fprintln(w,
		"\nRatios of each peer to fleetstore's Hit (ops/s above 1 or p50 below 1: the peer is faster):")
	fmt.Fprintln(w)
	table(w, head, lines, markdown)
}

// hitRow returns the Hit row at concurrency c; peerRow a peer system's.
type (
	hitRow  = func(c int) (row, bool)
	peerRow = func(system string, c int) (row, bool)
)

// A goal of issue 13 or 22: a figure of each driver's rows (or of each
// server's memory rows) against a bound.
type goal struct {
	figure string
	// hook: the figure is of each driver's hook row (Hit + Commit), not
	// its Hit row; cluster: of its cluster hook row.
	hook, cluster bool
	// label, when not nil, is the figure's name given the peers' rows.
	label  func(peer peerRow) string
	bound  string
	of     func(hit hitRow, peer peerRow) (v float64, ok bool)
	met    func(v float64) bool
	format func(v float64) string
}

// goals are issue 13's table: throughput, latency and server CPU of each
// driver's Hit against its peers at the same concurrency, in one run;
// p99 at c=64 beside them (tail latency is not traded away silently);
// then issue 22's for a whole hook at c=64 and a Hit alone (c=1).
var goals = []goal{
	{figure: "Hit ops/s at c=64 ÷ redis_rate Allow (1 bucket)", bound: "≥ 1.3×", format: ratio,
		met: func(v float64) bool { return v >= 1.3 },
		of:  ratioTo("redis_rate", 64, func(r row) float64 { return r.OpsPerSec })},
	{figure: "Hit p50 at c=1 ÷ script-floor p50", bound: "≤ 1.4×", format: ratio,
		met: func(v float64) bool { return v <= 1.4 },
		of:  ratioTo("script-floor", 1, func(r row) float64 { return r.P50us })},
	{figure: "server CPU per Hit at c=64 ÷ redis_rate's", bound: "≤ 1.2×", format: ratio,
		met: func(v float64) bool { return v <= 1.2 },
		of:  ratioTo("redis_rate", 64, func(r row) float64 { return r.ServerCPUus })},
	{figure: "Hit p99 at c=64, µs", format: num,
		label: func(peer func(string, int) (row, bool)) string {
			if p, ok := peer("redis_rate", 64); ok {
				return "Hit p99 at c=64, µs (redis_rate's: " + num(p.P99us) + ")"
			}
			return "Hit p99 at c=64, µs"
		},
		of: func(hit func(int) (row, bool), _ func(string, int) (row, bool)) (float64, bool) {
			h, ok := hit(64)
			return h.P99us, ok && h.P99us > 0
		}},
	{figure: "Hit p99 at c=64 ÷ redis_rate's p99", format: ratio,
		of: ratioTo("redis_rate", 64, func(r row) float64 { return r.P99us })},
	{figure: "hooks/s at c=64 ÷ redis_rate Allow/s", bound: "≥ 1.0×", format: ratio, hook: true,
		met: func(v float64) bool { return v >= 1.0 },
		of:  ratioTo("redis_rate", 64, func(r row) float64 { return r.OpsPerSec })},
	{figure: "script calls per hook at c=64 (EVALSHA + EVAL + FCALL)", bound: "≤ 1.25",
		format: func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }, hook: true,
		met: func(v float64) bool { return v <= 1.25 },
		of: func(hook hitRow, _ peerRow) (float64, bool) {
			h, ok := hook(64)
			if !ok || h.ScriptCalls == nil {
				return 0, false
			}
			return *h.ScriptCalls, true
		}},
	{figure: "hook p99 at c=64, µs", format: num, hook: true,
		of: func(hook hitRow, _ peerRow) (float64, bool) {
			h, ok := hook(64)
			return h.HookP99us, ok && h.HookP99us > 0
		}},
	{figure: "Hit p50 at c=1 ÷ redis_rate p50", bound: "≤ 1.25×", format: ratio,
		met: func(v float64) bool { return v <= 1.25 },
		of:  ratioTo("redis_rate", 1, func(r row) float64 { return r.P50us })},
	{figure: "server CPU per Hit at c=1 ÷ script-floor's", bound: "≤ 1.4×", format: ratio,
		met: func(v float64) bool { return v <= 1.4 },
		of:  ratioTo("script-floor", 1, func(r row) float64 { return r.ServerCPUus })},
}

// goals27 are issue 27's table: a whole hook (Hit + Commit) at c=64
// against redis_rate's Allow and its job, the script calls per hook, a
// Hit alone at c=1, the hook's tail, and the cluster's hooks/s (shown:
// its bound is the run before the change).
var goals27 = []goal{
	{figure: "hooks/s at c=64 ÷ redis_rate Allow/s", bound: "≥ 0.8×", format: ratio, hook: true,
		met: func(v float64) bool { return v >= 0.8 },
		of:  ratioTo("redis_rate", 64, func(r row) float64 { return r.OpsPerSec })},
	{figure: "hooks/s at c=64 ÷ redis_rate-job ops/s", bound: "≥ 2.0×", format: ratio, hook: true,
		met: func(v float64) bool { return v >= 2.0 },
		of:  ratioTo("redis_rate-job", 64, func(r row) float64 { return r.OpsPerSec })},
	{figure: "server CPU per hook at c=64 ÷ redis_rate Allow's", bound: "≤ 1.2×", format: ratio, hook: true,
		met: func(v float64) bool { return v <= 1.2 },
		of:  ratioTo("redis_rate", 64, func(r row) float64 { return r.ServerCPUus })},
	{figure: "script calls per hook at c=64 (EVALSHA + EVAL + FCALL)", bound: "≤ 0.6",
		format: func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }, hook: true,
		met: func(v float64) bool { return v <= 0.6 },
		of: func(hook hitRow, _ peerRow) (float64, bool) {
			h, ok := hook(64)
			if !ok || h.ScriptCalls == nil {
				return 0, false
			}
			return *h.ScriptCalls, true
		}},
	{figure: "Hit p50 at c=1 ÷ redis_rate p50", bound: "≤ 1.3×", format: ratio,
		met: func(v float64) bool { return v <= 1.3 },
		of:  ratioTo("redis_rate", 1, func(r row) float64 { return r.P50us })},
	{figure: "hook p99 at c=64 ÷ redis_rate p99", bound: "≤ 1.5×", format: ratio, hook: true,
		met: func(v float64) bool { return v <= 1.5 },
		of: func(hook hitRow, peer peerRow) (float64, bool) {
			h, ok1 := hook(64)
			p, ok2 := peer("redis_rate", 64)
			return divide(h.HookP99us, p.P99us, ok1 && ok2)
		}},
	{figure: "cluster (3 masters) hooks/s at c=64", format: num, cluster: true,
		of: func(hook hitRow, _ peerRow) (float64, bool) {
			h, ok := hook(64)
			return h.OpsPerSec, ok
		}},
}

// ratioTo is a goal's figure: field of the Hit row at concurrency c
// divided by field of peer's row at c.
func ratioTo(peer string, c int, field func(row) float64) func(hitRow, peerRow) (float64, bool) {
	return func(hit hitRow, peers peerRow) (float64, bool) {
		h, ok1 := hit(c)
		p, ok2 := peers(peer, c)
		return divide(field(h), field(p), ok1 && ok2)
	}
}

func divide(a, b float64, ok bool) (float64, bool) {
	if !ok || b == 0 {
		return 0, false
	}
	return a / b, true
}

// printGoals prints the goals' table: each goal's figure for the redis
// and the valkey driver, met or not; then the memory goal (≤ 100 bytes
// per committed claim, and per live claim in steady state) per server.
// A row with errors gives no figure.
func printGoals(w io.Writer, rows, mem []row, markdown bool) {
	clean := func(system string, c int) (row, bool) {
		r, ok := find(rows, system, c)
		return r, ok && r.Errors == 0
	}
	head := []string{"figure", "redis driver", "valkey driver", "goal"}
	lines := goalLines(goals27, clean)
	for _, what := range []struct{ system, figure string }{
		{"memory_per_claim", "bytes per committed claim"},
	} {
		for _, m := range mem {
			if m.System == what.system {
				lines = append(lines, []string{what.figure + ", " + m.Server, num(m.Bytes) + ": " +
					verdict(m.Bytes <= 100), "same keys", "≤ 100"})
			}
		}
	}
	if len(lines) > 0 {
		fmt.Fprintln(w, "\nGoals of issue 27 (ratios of rows of this run; load average "+loadAverage()+"):")
		fmt.Fprintln(w)
		table(w, head, lines, markdown)
	}
	printGoals13(w, goalLines(goals, clean), mem, markdown)
	printGoal30(w, clean, markdown)
}

// printGoal30 prints issue 30's goal: the server CPU of a Hit charging a
// monthly quota beside its two buckets, at c=64, over the same Hit's
// without it (the -hit-quota row over the -hit row of each driver).
func printGoal30(w io.Writer, clean peerRow, markdown bool) {
	line := []string{"server CPU per Hit at c=64, with a monthly quota ÷ without"}
	any := false
	for _, d := range []string{"fleetstore-redis-hit", "fleetstore-valkey-hit"} {
		q, ok1 := clean(d+"-quota", 64)
		h, ok2 := clean(d, 64)
		v, ok := divide(q.ServerCPUus, h.ServerCPUus, ok1 && ok2)
		if !ok {
			line = append(line, "")
			continue
		}
		any = true
		line = append(line, ratio(v)+": "+verdict(v <= 1.15))
	}
	if !any {
		return
	}
	fmt.Fprintln(w, "\nGoal of issue 30 (load average "+loadAverage()+"):")
	fmt.Fprintln(w)
	table(w, []string{"figure", "redis driver", "valkey driver", "goal"},
		[][]string{append(line, "≤ 1.15×")}, markdown)
}

// goalLines is each goal's line: its figure for the redis and the valkey
// driver, met or not, and its bound; a goal with no figure has none.
func goalLines(goals []goal, clean peerRow) [][]string {
	var lines [][]string
	for _, g := range goals {
		line := []string{g.figure}
		if g.label != nil {
			line[0] = g.label(clean)
		}
		any := false
		for _, d := range []string{"fleetstore-redis-hit", "fleetstore-valkey-hit"} {
			switch {
			case g.cluster:
				d = strings.Replace(d, "-hit", "-cluster-hook", 1)
			case g.hook:
				d = strings.Replace(d, "-hit", "-hook", 1)
			}
			v, ok := g.of(func(c int) (row, bool) { return clean(d, c) }, clean)
			if !ok {
				line = append(line, "")
				continue
			}
			any = true
			cell := g.format(v)
			if g.met != nil {
				cell += ": " + verdict(g.met(v))
			}
			line = append(line, cell)
		}
		if g.bound == "" {
			line = append(line, "shown")
		} else {
			line = append(line, g.bound)
		}
		if any {
			lines = append(lines, line)
		}
	}
	return lines
}

// printGoals13 prints the goals of issues 13 and 22 (lines), then the
// memory goals.
func printGoals13(w io.Writer, lines [][]string, mem []row, markdown bool) {
	head := []string{"figure", "redis driver", "valkey driver", "goal"}
	for _, what := range []struct{ system, figure string }{
		{"memory_per_claim", "bytes per committed claim"},
		{"memory_per_live_claim", "bytes per live claim, steady state (short TTL, commits expiring)"},
	} {
		for _, m := range mem {
			if m.System == what.system {
				lines = append(lines, []string{what.figure + ", " + m.Server, num(m.Bytes) + ": " +
					verdict(m.Bytes <= 100), "same keys", "≤ 100"})
			}
		}
	}
	if len(lines) == 0 {
		return
	}
	fmt.Fprintln(w, "\nGoals (issues 13 and 22; ratios of rows of this run):")
	fmt.Fprintln(w)
	table(w, head, lines, markdown)
}

func verdict(met bool) string {
	if met {
		return "met"
	}
	return "NOT met"
}

func find(rows []row, system string, c int) (row, bool) {
	for _, r := range rows {
		if r.System == system && r.Concurrency == c {
			return r, true
		}
	}
	return row{}, false
}

func table(w io.Writer, head []string, lines [][]string, markdown bool) {
	if markdown {
		fmt.Fprintln(w, "| "+strings.Join(head, " | ")+" |")
		sep := make([]string, len(head))
		for i := range sep {
			sep[i] = "---:"
		}
		sep[0] = "---"
		fmt.Fprintln(w, "|"+strings.Join(sep, "|")+"|")
		for _, l := range lines {
			fmt.Fprintln(w, "| "+strings.Join(l, " | ")+" |")
		}
		return
	}
	// Numbers right-aligned; the first column reads better left-aligned,
	// so it is padded to one width here.
	width := 0
	for _, l := range append([][]string{head}, lines...) {
		width = max(width, utf8.RuneCountInString(l[0]))
	}
	pad := func(l []string) string {
		first := l[0] + strings.Repeat(" ", width-utf8.RuneCountInString(l[0]))
		return first + "\t" + strings.Join(l[1:], "\t") + "\t"
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, pad(head))
	for _, l := range lines {
		fmt.Fprintln(tw, pad(l))
	}
	_ = tw.Flush()
}

func num(v float64) string {
	if v >= 100 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

func ratio(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) + "×" }

// cpuModel is /proc/cpuinfo's first "model name", or GOARCH elsewhere.
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				return strings.TrimSpace(v)
			}
		}
	}
	return runtime.GOARCH
}

// loadAverage is /proc/loadavg's three numbers, or "?" elsewhere.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// printGoalsPostgres prints issue 28's goals of the Postgres driver: its
// hooks/s at c=64 against pgbench -N's tps and against the same job
// written plainly with pgx, the statements (round trips) per Hit and
// per hook, and the disk a committed claim takes.
func printGoalsPostgres(w io.Writer, rows, mem []row, markdown bool) {
	clean := func(system string, c int) (row, bool) {
		r, ok := find(rows, system, c)
		return r, ok && r.Errors == 0
	}
	hook, hookOK := clean("fleetstore-postgres-hook", 64)
	var lines [][]string
	add := func(figure, cell, bound string) { lines = append(lines, []string{figure, cell, bound}) }
	for _, g := range []struct {
		peer, figure string
		bound        float64
	}{
		{"pgbench-N", "hooks/s at c=64 ÷ pgbench -N tps at 64 clients", 0.5},
		{"pgx-job", "hooks/s at c=64 ÷ pgx-job hooks/s (the job written plainly with pgx)", 2.0},
	} {
		if p, ok := clean(g.peer, 64); ok && hookOK && p.OpsPerSec > 0 {
			v := hook.OpsPerSec / p.OpsPerSec
			add(g.figure+" ("+num(hook.OpsPerSec)+" ÷ "+num(p.OpsPerSec)+")", ratio(v)+": "+verdict(v >= g.bound),
				"≥ "+strconv.FormatFloat(g.bound, 'f', 1, 64)+"×")
		}
	}
	two := func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }
	// Statements per Hit: the Hit's one hit_v2 statement, plus the
	// sweeper's (one a second) and the calls in flight at the window's
	// edges, which the server counts and the row does not: "1" is met
	// below 1.05.
	if h, ok := clean("fleetstore-postgres-hit", 64); ok && h.ScriptCalls != nil {
		add("round trips per Hit at c=64: top-level statements per Hit (pg_stat_statements; "+
			"one statement, sent alone, per round trip)", two(*h.ScriptCalls)+": "+verdict(*h.ScriptCalls < 1.05), "1")
	}
	for _, name := range []string{"fleetstore-postgres-hook", "pgx-job"} {
		if h, ok := clean(name, 64); ok && h.ScriptCalls != nil {
			add("statements per hook at c=64, "+name, two(*h.ScriptCalls), "shown")
		}
	}
	for _, m := range mem {
		if m.System == "disk_per_claim" {
			add(fmt.Sprintf("bytes per committed claim on disk (claims_v1, its index included, after VACUUM; "+
				"%d claims), %s", m.Items, m.Server), num(m.Bytes), "shown")
		}
	}
	if len(lines) == 0 {
		return
	}
	fmt.Fprintln(w, "\nGoals of issue 28, Postgres (ratios of rows of this run; load average "+loadAverage()+"):")
	fmt.Fprintln(w)
	table(w, []string{"figure", "postgres driver", "goal"}, lines, markdown)
}
