package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/observe"
)

// benchReport is what a bench run measured; -json prints it as is.
// Latencies are in µs.
type benchReport struct {
	URL         string   `json:"url"` // password redacted
	Concurrency int      `json:"concurrency"`
	Warmup      float64  `json:"warmup_s"`
	Duration    float64  `json:"duration_s"` // measured: shorter when interrupted
	Interrupted bool     `json:"interrupted"`
	Tenants     int      `json:"tenants"`
	Skew        float64  `json:"skew"` // Zipf exponent; 0: uniform
	Kinds       []string `json:"kinds"`
	Dup         float64  `json:"dup"`
	Rate        float64  `json:"rate_per_tenant"` // hooks/s
	Burst       int64    `json:"burst"`
	Body        int64    `json:"body_bytes"`
	Hold        float64  `json:"hold_s"`

	Hooks        uint64            `json:"hooks"`        // Hit calls, errors included
	Decided      uint64            `json:"decided"`      // Hits with an outcome, local ones too
	Throughput   float64           `json:"hooks_per_s"`  // decided Hits a second (a failed: none)
	FailedCalls  uint64            `json:"failed_calls"` // Hit and Commit calls that failed
	ErrorShare   float64           `json:"error_share"`  // failed_calls / Hit and Commit calls
	Outcomes     map[string]uint64 `json:"outcomes"`     // ok, duplicate, pending, rate_limited
	HitErrors    map[string]uint64 `json:"hit_errors"`
	Commits      uint64            `json:"commits"` // without error
	CommitErrors map[string]uint64 `json:"commit_errors"`
	ErrorSamples []string          `json:"error_samples,omitempty"` // the first error of each class

	Hit    latency `json:"hit_latency_us"`
	Commit latency `json:"commit_latency_us"`

	Ping *pingReport `json:"ping,omitempty"`

	Fallback *fallbackReport `json:"fallback,omitempty"` // with -fallback or fallback_* in the URL

	local     uint64 // measured Hits decided locally
	calls     uint64 // measured Hit and Commit calls
	topSample string // the first error of the most frequent class
}

// fallbackReport is what the degraded mode did during the run: Hits
// decided locally (measured), and the Store's outbox counters over the
// whole run (warm-up included), from Store.FallbackStats.
type fallbackReport struct {
	LocalDecisions uint64 `json:"local_decisions"` // measured Hits with Result.Local
	Degraded       bool   `json:"degraded"`        // at the end of the run
	Outages        uint64 `json:"outages"`
	Queued         uint64 `json:"queued"` // commits queued for replay
	Outbox         int    `json:"outbox"` // still queued at the end
	Replayed       uint64 `json:"replayed"`
	Conflicts      uint64 `json:"conflicts"`
	Dropped        uint64 `json:"dropped"`
	ClaimsDropped  uint64 `json:"claims_dropped"`
}

// addFallback reports the degraded mode's counters between two Stats.
func (r *benchReport) addFallback(before, after observe.Stats) {
	r.Fallback = &fallbackReport{
		LocalDecisions: r.local,
		Degraded:       after.Degraded,
		Outages:        after.Outages - before.Outages,
		Queued:         after.Queued - before.Queued,
		Outbox:         after.Outbox,
		Replayed:       after.Replayed - before.Replayed,
		Conflicts:      after.Conflicts - before.Conflicts,
		Dropped:        after.Dropped - before.Dropped,
		ClaimsDropped:  after.ClaimsDropped - before.ClaimsDropped,
	}
}

// latency summarises a histogram of ns in µs.
type latency struct {
	Count int64   `json:"count"`
	Mean  float64 `json:"mean"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P99   float64 `json:"p99"`
	P999  float64 `json:"p99_9"`
	Max   float64 `json:"max"`
}

func summary(h *hdrhistogram.Histogram) latency {
	if h.TotalCount() == 0 {
		return latency{}
	}
	us := func(ns int64) float64 { return float64(ns) / 1e3 }
	return latency{
		Count: h.TotalCount(),
		Mean:  h.Mean() / 1e3,
		P50:   us(h.ValueAtQuantile(50)),
		P90:   us(h.ValueAtQuantile(90)),
		P99:   us(h.ValueAtQuantile(99)),
		P999:  us(h.ValueAtQuantile(99.9)),
		Max:   us(h.Max()),
	}
}

// pingReport is the Ping baseline: Store.Ping alone, concurrency 1.
type pingReport struct {
	Latency latency           `json:"latency_us"`
	Errors  map[string]uint64 `json:"errors"`

	hist   *hdrhistogram.Histogram
	errs   [numClasses]uint64
	sample string
}

func newReport(cfg *benchConfig, limits []kindLimit) *benchReport {
	r := &benchReport{
		URL:         redactURL(cfg.url),
		Concurrency: cfg.concurrency,
		Warmup:      cfg.warmup.Seconds(),
		Tenants:     cfg.tenants,
		Skew:        cfg.skew,
		Dup:         cfg.dup,
		Rate:        cfg.rate,
		Burst:       cfg.burst,
		Body:        cfg.body,
		Hold:        cfg.hold.Seconds(),
	}
	for _, l := range limits {
		r.Kinds = append(r.Kinds, string(l.kind))
	}
	return r
}

// add merges the workers' histograms and counts, measured from
// measureFrom to end.
func (r *benchReport) add(l *load, measureFrom, end time.Time) {
	hit, commit := newHist(), newHist()
	var outcomes [fleetstore.RateLimited + 1]uint64
	var hitErrs, commitErrs [numClasses]uint64
	samples := make(map[errClass]string)
	for _, w := range l.workers {
		hit.Merge(w.hit)
		commit.Merge(w.commit)
		for i := range outcomes {
			outcomes[i] += w.n.outcomes[i].Load()
		}
		for c := range numClasses {
			hitErrs[c] += w.n.hitErrs[c].Load()
			commitErrs[c] += w.n.commitErrs[c].Load()
			if s, ok := w.samples[c]; ok && samples[c] == "" {
				samples[c] = s
			}
		}
		r.Hooks += w.n.hits()
		r.Commits += w.n.commits.Load()
		r.local += w.n.local.Load()
	}
	r.Outcomes = make(map[string]uint64)
	for o := fleetstore.OK; o <= fleetstore.RateLimited; o++ {
		r.Outcomes[o.String()] = outcomes[o]
		r.Decided += outcomes[o]
	}
	r.calls = r.Hooks + r.Commits
	for c := range numClasses {
		r.FailedCalls += hitErrs[c] + commitErrs[c]
		r.calls += commitErrs[c]
	}
	if r.calls > 0 {
		r.ErrorShare = float64(r.FailedCalls) / float64(r.calls)
	}
	r.Duration = max(end.Sub(measureFrom), 0).Seconds()
	if r.Duration > 0 {
		r.Throughput = float64(r.Decided) / r.Duration
	}
	r.HitErrors, r.CommitErrors = classMap(hitErrs, false), classMap(commitErrs, true)
	top := classOther
	for c := range numClasses {
		if s := samples[c]; s != "" {
			r.ErrorSamples = append(r.ErrorSamples, s)
		}
		if hitErrs[c]+commitErrs[c] > hitErrs[top]+commitErrs[top] {
			top = c
		}
	}
	r.topSample = samples[top]
	r.Hit, r.Commit = summary(hit), summary(commit)
	if p := r.Ping; p != nil {
		p.Latency = summary(p.hist)
		p.Errors = classMap(p.errs, false)
		if p.sample != "" {
			r.ErrorSamples = append(r.ErrorSamples, p.sample)
		}
	}
}

// verdict is the run's exit status and, unless it is exitOK, the one line
// that says why: interrupted; nothing measured; every call failed (the
// store did not answer); or an error share above maxErrors.
func (r *benchReport) verdict(maxErrors float64) (int, string) {
	first := ""
	if r.topSample != "" {
		first = "; first " + r.topSample
	}
	switch {
	case r.Interrupted:
		return exitInterrupted, "interrupted: the report covers the run until then"
	case r.calls == 0:
		return exitFail, "no Hit ended within the measured duration: nothing measured"
	case r.FailedCalls == r.calls:
		return exitUnreachable, fmt.Sprintf("every call failed (%s Hits, %s Commits): "+
			"no hook decided, nothing measured%s",
			count(r.Hooks), count(r.calls-r.Hooks), first)
	case r.ErrorShare > maxErrors:
		return exitFail, fmt.Sprintf("%s of calls failed (%s of %s), above -max-errors %g%s",
			percent(r.FailedCalls, r.calls), count(r.FailedCalls), count(r.calls), maxErrors, first)
	}
	return exitOK, ""
}

// classMap names the counts of each error class; claim_lost only where
// it can happen (Commit).
func classMap(counts [numClasses]uint64, claimLost bool) map[string]uint64 {
	m := make(map[string]uint64)
	for c := range numClasses {
		if c != classClaimLost || claimLost {
			m[classNames[c]] = counts[c]
		}
	}
	return m
}

func (r *benchReport) writeJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

func (r *benchReport) writeText(out io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "fleetstore bench %s\n", r.URL)
	shape := "uniform"
	if r.Skew > 0 {
		shape = fmt.Sprintf("Zipf s=%g", r.Skew)
	}
	fmt.Fprintf(&b, "  %d workers, %s measured", r.Concurrency, seconds(r.Duration))
	if r.Warmup > 0 {
		fmt.Fprintf(&b, " after %s warm-up", seconds(r.Warmup))
	}
	if r.Interrupted {
		b.WriteString(" (interrupted)")
	}
	fmt.Fprintf(&b, "; %d tenants (%s); kinds %s; dup %g; %g hooks/s burst %d per tenant; body %d B",
		r.Tenants, shape, strings.Join(r.Kinds, "+"), r.Dup, r.Rate, r.Burst, r.Body)
	if r.Hold > 0 {
		fmt.Fprintf(&b, "; hold %s", seconds(r.Hold))
	}
	b.WriteString("\n\n")

	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%-10s\tcount\tp50\tp90\tp99\tp99.9\tmax\t\n", "latency")
	if p := r.Ping; p != nil {
		latencyRow(tw, "ping (c=1)", p.Latency)
	}
	latencyRow(tw, "hit", r.Hit)
	latencyRow(tw, "commit", r.Commit)
	tw.Flush()
	b.WriteString("\n")

	fmt.Fprintf(&b, "throughput   %s hooks/s decided (%s of %s Hits in %s; %s of calls failed)\n",
		count(uint64(r.Throughput+0.5)), count(r.Decided), count(r.Hooks), seconds(r.Duration),
		percent(r.FailedCalls, r.calls))
	b.WriteString("outcomes   ")
	for o := fleetstore.OK; o <= fleetstore.RateLimited; o++ {
		n := r.Outcomes[o.String()]
		fmt.Fprintf(&b, "  %s %s (%s)", o, count(n), percent(n, r.Hooks))
	}
	fmt.Fprintf(&b, "\ncommits      %s\n", count(r.Commits))
	fmt.Fprintf(&b, "errors       hit: %s; commit: %s",
		classLine(r.HitErrors), classLine(r.CommitErrors))
	if r.Ping != nil {
		fmt.Fprintf(&b, "; ping: %s", classLine(r.Ping.Errors))
	}
	b.WriteString("\n")
	if f := r.Fallback; f != nil {
		state := "shared"
		if f.Degraded {
			state = "degraded"
		}
		fmt.Fprintf(&b, "fallback     local decisions %s (%s of hits); "+
			"commits queued %s, replayed %s, conflicts %s, dropped %s, outbox %s; "+
			"outages %s; %s at the end\n",
			count(f.LocalDecisions), percent(f.LocalDecisions, r.Hooks),
			count(f.Queued), count(f.Replayed), count(f.Conflicts),
			count(f.Dropped), count(uint64(f.Outbox)), count(f.Outages), state)
	}
	for _, s := range r.ErrorSamples {
		fmt.Fprintf(&b, "  first %s\n", s)
	}
	_, err := io.WriteString(out, b.String())
	return err
}

func latencyRow(w io.Writer, name string, l latency) {
	if l.Count == 0 {
		fmt.Fprintf(w, "%-10s\t0\t-\t-\t-\t-\t-\t\n", name)
		return
	}
	fmt.Fprintf(w, "%-10s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", name, count(uint64(l.Count)),
		micros(l.P50), micros(l.P90), micros(l.P99), micros(l.P999), micros(l.Max))
}

func classLine(m map[string]uint64) string {
	var parts []string
	for c := range numClasses {
		if n, ok := m[classNames[c]]; ok && n > 0 {
			parts = append(parts, classNames[c]+" "+count(n))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// micros formats µs with three significant digits in a fitting unit.
func micros(us float64) string {
	d := time.Duration(us * 1e3)
	switch {
	case d < time.Microsecond:
		return strconv.FormatInt(int64(d), 10) + "ns"
	case d < time.Millisecond:
		return sig3(us) + "µs"
	case d < time.Second:
		return sig3(us/1e3) + "ms"
	}
	return sig3(us/1e6) + "s"
}

func sig3(v float64) string {
	switch {
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

func seconds(s float64) string { return strconv.FormatFloat(s, 'f', 2, 64) + "s" }

// count formats n with thousands separators: 1,234,567.
func count(n uint64) string {
	s := strconv.FormatUint(n, 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func percent(n, of uint64) string {
	if of == 0 {
		return "-"
	}
	return strconv.FormatFloat(100*float64(n)/float64(of), 'f', 1, 64) + "%"
}

// progress rewrites one line on w every second until done: elapsed time,
// the last second's throughput and the outcome shares so far. It reads
// the workers' counters, never their histograms.
func (l *load) progress(w io.Writer, start, measureFrom time.Time, d time.Duration,
	done <-chan struct{}) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var last uint64
	lastAt := start
	for {
		select {
		case <-done:
			fmt.Fprint(w, "\r\033[K")
			return
		case now := <-tick.C:
			var hooks, errs uint64
			var outcomes [fleetstore.RateLimited + 1]uint64
			for _, wk := range l.workers {
				hooks += wk.n.hits()
				for i := range outcomes {
					outcomes[i] += wk.n.outcomes[i].Load()
				}
				for c := range numClasses {
					errs += wk.n.hitErrs[c].Load() + wk.n.commitErrs[c].Load()
				}
			}
			if now.Sub(measureFrom) < 100*time.Millisecond {
				// Warm-up calls are not counted: nothing to show yet.
				fmt.Fprintf(w, "\r\033[Kwarm-up %.0fs", now.Sub(start).Seconds())
				continue
			}
			if lastAt.Before(measureFrom) {
				lastAt = measureFrom
			}
			rate := float64(hooks-last) / now.Sub(lastAt).Seconds()
			last, lastAt = hooks, now
			share := func(o fleetstore.Outcome) string { return percent(outcomes[o], hooks) }
			fmt.Fprintf(w, "\r\033[K%5.1fs/%s  %s hooks/s  "+
				"ok %s  dup %s  pending %s  limited %s  errors %s",
				now.Sub(measureFrom).Seconds(), d, count(uint64(rate)),
				share(fleetstore.OK), share(fleetstore.Duplicate), share(fleetstore.Pending),
				share(fleetstore.RateLimited), count(errs))
		}
	}
}
