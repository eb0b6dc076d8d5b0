package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/gcra"
)

const benchUsage = `usage: fleetstore bench [flags] [URL]

Drives the load of a fleet of webhook edge nodes against the store: each of
-c workers takes a hook for a tenant (uniform over -tenants, or Zipf-skewed
with -skew), charges -kinds buckets (hooks, bytes, k3, …) and claims the
hook's event key in one Hit; a fraction -dup of hooks reuse a recently
claimed key (Duplicate or Pending); every OK hook is committed. Hit and
Commit are timed apart. The defaults leave most hooks OK: 10,000 tenants
at 1,000 hooks/s each deny nothing below 10M hooks/s.

Before the load, Store.Ping runs alone (concurrency 1) for -ping: the
store's bare round trip, the "ping (c=1)" row. It is a floor to read the
Hit row against, not a ratio of costs: Hit runs at -c under load.

It stops after -warmup + -d, or at Ctrl-C, and prints what it measured.
URL is the argument, else $FLEETSTORE_URL, else memory://.

Throughput counts decided hooks only (a Hit that returned an outcome, also
one decided locally by the degraded mode); a Hit or Commit that returned an
error is counted under errors, never as throughput. The error share is
failed calls over all measured Hit and Commit calls (the Ping baseline
aside).

It first pings the store (Store.Ping, up to 3 tries; skipped with the
degraded mode on): a store that does not answer is one line, "store
unreachable", and exit status 3, with no load run; one that answers the
ping with an error (a wrong password, an ACL) is one line, "store refused
the ping", and exit status 3 too. With -json that line is instead one
JSON object on stdout:
  {"status":"UNREACHABLE","reason":"…"}   (or "status":"REFUSED")

exit status: 0 the error share is at most -max-errors; 1 it is above; 2 a
bad URL or flag; 3 the store did not answer the ping or refused it, or
every Hit and Commit of the run failed (nothing was measured); 130
interrupted (Ctrl-C; the report of what ran is printed first).

-fallback N opens the store with its degraded mode on, as one node of N
(fleetstore.WithFallback; fallback_nodes=N in the URL does the same): point
it at a dead or silent address to measure a degraded node, e.g.
"fleetstore bench -fallback 8 redis://127.0.0.1:1". The report then counts
the Hits decided locally and the commits queued for replay.

flags:
`

// pingFailure is bench -json's one object when the ping before the load
// failed: status UNREACHABLE or REFUSED, as check -json's ping line.
type pingFailure struct {
	Status string `json:"status"`
	Reason string `json:"reason"`
}

// benchConfig is the load of one bench run.
type benchConfig struct {
	url         string
	concurrency int
	duration    time.Duration
	warmup      time.Duration
	ping        time.Duration
	tenants     int
	skew        float64
	kinds       int
	dup         float64
	rate        float64 // hooks per second per tenant
	burst       int64   // hooks
	body        int64   // mean body size, bytes
	hold        time.Duration
	ttl         time.Duration
	pendingTTL  time.Duration
	fallback    int // fleet size for WithFallback; 0: off
	maxErrors   float64
	json        bool
}

// runBench runs "fleetstore bench [flags] [URL]" and returns the exit
// status. ctx done (Ctrl-C) ends the load early: the report of what ran is
// printed and the status is exitInterrupted.
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var cfg benchConfig
	fs := cfg.flagSet()
	positional, err := parseArgs(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		printUsage(stdout, benchUsage, fs)
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "fleetstore bench: %v (fleetstore help bench lists the flags)\n", err)
		return exitUsage
	}
	if cfg.url, err = storeURL(positional); err != nil {
		fmt.Fprintln(stderr, "fleetstore bench:", err)
		return exitUsage
	}
	if err := cfg.check(); err != nil {
		fmt.Fprintln(stderr, "fleetstore bench:", err)
		return exitUsage
	}
	var opts []fleetstore.Option
	if cfg.fallback > 0 {
		opts = append(opts, fleetstore.WithFallback(fleetstore.Fallback{Nodes: cfg.fallback}))
	}
	store, err := fleetstore.Open(cfg.url, opts...)
	if err != nil {
		fmt.Fprintln(stderr, oneLine(err)) // "fleetstore: open: …", one line, no credentials
		return exitUsage
	}
	defer store.Close()
	if code := cfg.pingFirst(ctx, store, stdout, stderr); code != exitOK {
		return code
	}
	return cfg.run(ctx, store, stdout, stderr)
}

// flagSet declares c's flags, with the defaults of a bench run.
func (c *benchConfig) flagSet() *flag.FlagSet {
	fs := flag.NewFlagSet("fleetstore bench", flag.ContinueOnError)
	fs.IntVar(&c.concurrency, "c", 16, "concurrent workers (hooks in flight)")
	fs.DurationVar(&c.duration, "d", 10*time.Second, "measured duration")
	fs.DurationVar(&c.warmup, "warmup", 0, "load before the measured duration, not counted")
	fs.DurationVar(&c.ping, "ping", time.Second,
		"Ping baseline at concurrency 1 before the load, at most 5000 pings (0: skip)")
	// The defaults leave most hooks accepted at any throughput one machine
	// reaches: 10,000 tenants at 1,000 hooks/s each is 10M hooks/s before
	// any bucket denies. A Zipf skew puts a share of every hook on the top
	// tenant (about 18% at s=1.1 over 10,000), which its limit then denies
	// once the store is fast: a measure of denials, not of the common path.
	fs.IntVar(&c.tenants, "tenants", 10000, "number of tenants")
	fs.Float64Var(&c.skew, "skew", 0,
		"Zipf exponent s > 1 of the tenants' share of hooks, e.g. 1.1 (0: uniform)")
	fs.IntVar(&c.kinds, "kinds", 2,
		"buckets charged per hook, 1–"+strconv.Itoa(maxKinds)+": hooks, bytes, then k3, k4")
	fs.Float64Var(&c.dup, "dup", 0.05,
		"fraction 0–1 of hooks that reuse a recently claimed event key")
	fs.Float64Var(&c.rate, "rate", 1000,
		"hooks per second per tenant (bytes: rate × body; k3…: 2 × rate)")
	fs.Int64Var(&c.burst, "burst", 100,
		"burst per tenant, in hooks (bytes: burst × body; k3…: 2 × burst)")
	fs.Int64Var(&c.body, "body", 4096,
		"mean body size in bytes, charged to the bytes bucket (uniform in body/2 … 3·body/2)")
	fs.DurationVar(&c.hold, "hold", 0,
		"time a hook takes to become durable, between Hit and Commit")
	fs.DurationVar(&c.ttl, "ttl", 10*time.Second,
		"claim TTL after commit (short: the bench writes many keys)")
	fs.DurationVar(&c.pendingTTL, "pending-ttl", 5*time.Second, "claim TTL while pending")
	fs.IntVar(&c.fallback, "fallback", 0, "degraded mode on, as one node of a fleet of N "+
		"(WithFallback Nodes N): Hits go local when the store is out (0: off)")
	fs.Float64Var(&c.maxErrors, "max-errors", 0.01,
		"highest error share 0–1 (failed Hit and Commit calls over all of them) that still exits 0")
	fs.BoolVar(&c.json, "json", false, "print one JSON object, no progress line")
	return fs
}

// pingFirst pings the store before the load, unless the degraded mode is
// on: a store that does not answer is one line, as for check, and
// exitUnreachable, since a load of calls that all fail would measure
// nothing. With the degraded mode on, a dead store is what the run
// measures. It returns exitOK when the load may run.
func (c *benchConfig) pingFirst(ctx context.Context, store *fleetstore.Store, stdout, stderr io.Writer) int {
	if c.degradable() {
		return exitOK
	}
	err := ping(ctx, store)
	if ctx.Err() != nil {
		fmt.Fprintln(stderr, "fleetstore bench: interrupted")
		return exitInterrupted
	}
	if err != nil {
		status, phrase := pingVerdict(err)
		if c.json {
			writeJSONLine(stdout, pingFailure{Status: status, Reason: oneLine(err)})
		} else {
			fmt.Fprintf(stderr, "fleetstore bench %s: %s, nothing measured: %s\n", redactURL(c.url),
				phrase, oneLine(err))
		}
		return exitUnreachable
	}
	return exitOK
}

// run drives the load and prints its report: JSON with -json, else text
// with a progress line when stderr is a terminal. The exit status is the
// report's verdict against -max-errors.
func (c *benchConfig) run(ctx context.Context, store *fleetstore.Store, stdout, stderr io.Writer) int {
	var progress io.Writer
	if !c.json && isTerminal(stderr) {
		progress = stderr
	}
	rep, err := bench(ctx, store, c, progress)
	if err != nil {
		fmt.Fprintln(stderr, "fleetstore bench:", err)
		return exitUsage
	}
	if c.json {
		err = rep.writeJSON(stdout)
	} else {
		err = rep.writeText(stdout)
	}
	if err != nil {
		fmt.Fprintln(stderr, "fleetstore bench:", err)
		return exitFail
	}
	code, verdict := rep.verdict(c.maxErrors)
	if verdict != "" {
		fmt.Fprintln(stderr, "fleetstore bench:", verdict)
	}
	return code
}

func (c *benchConfig) check() error {
	switch {
	case c.concurrency < 1:
		return fmt.Errorf("-c must be at least 1, got %d", c.concurrency)
	case c.duration <= 0:
		return fmt.Errorf("-d must be positive, got %v", c.duration)
	case c.warmup < 0:
		return fmt.Errorf("-warmup must not be negative, got %v", c.warmup)
	case c.ping < 0:
		return fmt.Errorf("-ping must not be negative, got %v", c.ping)
	case c.tenants < 1:
		return fmt.Errorf("-tenants must be at least 1, got %d", c.tenants)
	case c.skew != 0 && !(c.skew > 1):
		return fmt.Errorf("-skew must be 0 (uniform) or above 1, got %v", c.skew)
	case c.kinds < 1 || c.kinds > maxKinds:
		return fmt.Errorf("-kinds must be 1–%d, got %d", maxKinds, c.kinds)
	case !(c.dup >= 0 && c.dup <= 1):
		return fmt.Errorf("-dup must be 0–1, got %v", c.dup)
	case !(c.rate > 0):
		return fmt.Errorf("-rate must be positive, got %v", c.rate)
	case c.burst < 1:
		return fmt.Errorf("-burst must be at least 1, got %d", c.burst)
	case c.body < 1:
		return fmt.Errorf("-body must be at least 1 byte, got %d", c.body)
	case c.hold < 0:
		return fmt.Errorf("-hold must not be negative, got %v", c.hold)
	case c.ttl < time.Millisecond || c.pendingTTL < time.Millisecond:
		return fmt.Errorf("-ttl and -pending-ttl must be at least 1ms, got %v and %v",
			c.ttl, c.pendingTTL)
	case !(c.maxErrors >= 0 && c.maxErrors <= 1):
		return fmt.Errorf("-max-errors must be 0–1, got %v", c.maxErrors)
	case c.fallback < 0:
		return fmt.Errorf("-fallback must be a fleet size of at least 1, or 0 (off), got %d", c.fallback)
	}
	_, err := c.limits()
	return err
}

// degradable reports whether the run's Store has its degraded mode on
// (-fallback, or fallback_* in the URL).
func (c *benchConfig) degradable() bool {
	return c.fallback > 0 || strings.Contains(c.url, "fallback_")
}

// maxKinds is the most buckets one Hit charges (fleetstore.MaxCharges).
const maxKinds = fleetstore.MaxCharges

// kindLimit is the GCRA limit of one kind, for every tenant.
type kindLimit struct {
	kind fleetstore.Kind
	// increment and capacity of one charge; for bytes, capacity only.
	increment, capacity time.Duration
	// bytesPerSecond and burstBytes of the bytes kind (0 for the others):
	// its increment depends on each hook's body size.
	bytesPerSecond, burstBytes int64
}

// limits returns the limit of each kind charged per hook: hooks at -rate
// and -burst, bytes at rate × body per second with burst × body, and k3…
// at twice the hooks limit (e.g. per-source limits that rarely bind).
func (c *benchConfig) limits() ([]kindLimit, error) {
	period := time.Duration(float64(time.Second) / c.rate)
	inc, capacity, err := gcra.Rate(1, period, c.burst)
	if err != nil {
		return nil, fmt.Errorf("-rate %v with -burst %d: %w", c.rate, c.burst, err)
	}
	out := []kindLimit{{kind: fleetstore.Hooks, increment: inc, capacity: capacity}}
	if c.kinds >= 2 {
		bps := int64(c.rate * float64(c.body))
		burstBytes := c.burst * c.body
		_, bcap, err := gcra.ByteRate(bps, burstBytes, c.body)
		if bps < 1 || err != nil {
			return nil, fmt.Errorf("-rate %v × -body %d bytes/s with a burst of %d bytes is out of range",
				c.rate, c.body, burstBytes)
		}
		out = append(out, kindLimit{kind: fleetstore.Bytes, capacity: bcap, bytesPerSecond: bps,
			burstBytes: burstBytes})
	}
	for k := 3; k <= c.kinds; k++ {
		inc, capacity, err := gcra.Rate(2, period, 2*c.burst)
		if err != nil {
			return nil, fmt.Errorf("-rate %v with -burst %d: %w", c.rate, c.burst, err)
		}
		kind := fleetstore.Kind("k" + strconv.Itoa(k))
		out = append(out, kindLimit{kind: kind, increment: inc, capacity: capacity})
	}
	return out, nil
}

// bench runs the Ping baseline and the load, and returns what it measured.
// It stops after warmup + duration or when ctx is done (Ctrl-C).
func bench(ctx context.Context, store *fleetstore.Store, cfg *benchConfig,
	progress io.Writer) (*benchReport, error) {
	limits, err := cfg.limits()
	if err != nil {
		return nil, err
	}
	rep := newReport(cfg, limits)
	statsBefore := store.FallbackStats()
	if cfg.ping > 0 {
		rep.Ping = pingBaseline(ctx, store, cfg.ping)
	}

	l := newLoad(store, cfg, limits)
	start := time.Now()
	measureFrom := start.Add(cfg.warmup)
	runCtx, cancel := context.WithDeadline(ctx, measureFrom.Add(cfg.duration))
	defer cancel()
	var wg sync.WaitGroup
	for _, w := range l.workers {
		wg.Go(func() { w.run(runCtx, measureFrom) })
	}
	if progress != nil {
		done := make(chan struct{})
		var pwg sync.WaitGroup
		pwg.Go(func() { l.progress(progress, start, measureFrom, cfg.duration, done) })
		wg.Wait()
		close(done)
		pwg.Wait()
	} else {
		wg.Wait()
	}
	end := time.Now()
	rep.Interrupted = ctx.Err() != nil
	rep.add(l, measureFrom, end)
	if cfg.degradable() {
		rep.addFallback(statsBefore, store.FallbackStats())
	}
	return rep, nil
}

// runID names this run's tenants and keys, so that two runs against one
// store never meet each other's buckets or claims.
func runID() string {
	var b [4]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// isTerminal reports whether w is a terminal (the progress line goes there).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
