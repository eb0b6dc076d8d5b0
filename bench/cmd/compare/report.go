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
	fmt.Fprintf(w, "%s; %d interleaved round(s) of %v per row after %v warm-up; go-redis pool %d; %d tenants per row\n",
		version, cfg.rounds, cfg.run.duration, cfg.run.warmup, cfg.run.pool, cfg.run.tenants)
	fmt.Fprintf(w, "%s, %s %s/%s, %d CPUs (GOMAXPROCS %d), load average %s\n\n",
		cpuModel(), runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.GOMAXPROCS(0), loadAverage())

	head := []string{"system", "c", "ops/s", "p50 µs", "p99 µs", "hook p50 µs", "hook p99 µs", "server CPU µs/op", "client CPU µs/op", "client allocs/op", "not OK", "errors"}
	var lines [][]string
	for _, r := range rows {
		hook50, hook99 := "", ""
		if r.HookP50us > 0 {
			hook50, hook99 = num(r.HookP50us), num(r.HookP99us)
		}
		lines = append(lines, []string{r.System, strconv.Itoa(r.Concurrency), strconv.FormatFloat(r.OpsPerSec, 'f', 0, 64),
			num(r.P50us), num(r.P99us), hook50, hook99, num(r.ServerCPUus), num(r.ClientCPUus), num(r.Allocs),
			strconv.FormatUint(r.NotOK, 10), strconv.FormatUint(r.Errors, 10)})
	}
	table(w, head, lines, cfg.markdown)

	if len(mem) > 0 {
		fmt.Fprintln(w)
		for _, m := range mem {
			what := "tenant (hooks + bytes buckets: one hash, two fields, PX expiry)"
			if m.System == "memory_per_claim" {
				what = "committed claim (one string with PX expiry; 36-byte key, 26-byte hook id)"
			}
			fmt.Fprintf(w, "Redis memory per %s: %s bytes (used_memory growth over %d)\n", what, num(m.Bytes), m.Items)
		}
	}

	printRatios(w, rows, cfg.markdown)
	printGoals(w, rows)
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
	fmt.Fprintln(w, "\nRatios of each peer to fleetstore's Hit (ops/s above 1 or p50 below 1: the peer is faster):")
	fmt.Fprintln(w)
	table(w, head, lines, markdown)
}

// printGoals checks the project's goals: the full Hit at least as fast as
// redis_rate's single bucket at concurrency 64; its p50 at concurrency 1
// within 1.3× of PING on the same client.
func printGoals(w io.Writer, rows []row) {
	var out []string
	for _, d := range []struct{ hit, ping string }{
		{"fleetstore-redis-hit", "ping-go-redis"},
		{"fleetstore-valkey-hit", "ping-valkey-go"},
	} {
		if hit, ok := find(rows, d.hit, 64); ok && hit.Errors == 0 {
			if peer, ok := find(rows, "redis_rate", 64); ok && peer.OpsPerSec > 0 && peer.Errors == 0 {
				r := hit.OpsPerSec / peer.OpsPerSec
				out = append(out, fmt.Sprintf("%s ops/s at c=64 ÷ redis_rate's: %s (goal ≥ 1): %s", d.hit, ratio(r), verdict(r >= 1)))
			}
		}
		if hit, ok := find(rows, d.hit, 1); ok && hit.Errors == 0 {
			if ping, ok := find(rows, d.ping, 1); ok && ping.P50us > 0 && ping.Errors == 0 {
				r := hit.P50us / ping.P50us
				out = append(out, fmt.Sprintf("%s p50 at c=1 ÷ %s's: %s (goal ≤ 1.3): %s", d.hit, d.ping, ratio(r), verdict(r <= 1.3)))
			}
		}
	}
	if len(out) == 0 {
		return
	}
	fmt.Fprintln(w, "\nGoals:")
	for _, s := range out {
		fmt.Fprintln(w, "  "+s)
	}
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
