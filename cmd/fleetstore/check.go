package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/conformance"
	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/drivers/memory"
)

const checkUsage = `usage: fleetstore check [flags] [URL]

Runs every clause of the contract (G1–G11, Q1–Q6, C1–C10, T1–T6, V1–V4)
against the store and prints PASS, FAIL or SKIP for each, with the reason.

It first pings the store (Store.Ping, up to 3 tries within the store's
timeout each; no Hit, nothing written): a store that does not answer is
one line, "store unreachable", and exit status 3, not 20-odd FAILs; one
that answers the ping with an error (a wrong password, an ACL) is one
line, "store refused the ping", and exit status 3 too.

exit status: 0 nothing failed; 1 a clause failed; 2 a bad URL or flag;
3 the store did not answer the ping, or refused it; 130 interrupted
(Ctrl-C).

-json prints JSON lines on stdout: one object per clause, in document
order, as each verdict is in:
  {"clause":"G1","title":"…","status":"PASS","reason":"","elapsed_ms":12}
status is PASS, FAIL or SKIP; reason is why it failed or was skipped (the
clause's messages, newline-separated; with -v, a pass's too). A store
that does not answer is the one line
  {"clause":"ping","status":"UNREACHABLE","reason":"…"}
and one that refuses the ping the same line with status REFUSED.
Errors (bad URL or flag, interrupted) go to stderr as in text mode.

It writes only under a random key_prefix and random tenants; it never
flushes the store. The clauses that need another address (T1–T4, V4) point
the driver at listeners of their own on 127.0.0.1. Clause ids in -only
are case-insensitive.

flags:
`

// pingTries is how many Pings check makes before it calls the store
// unreachable: the first may pay for a cold dial (TLS) within the budget.
const pingTries = 3

// clauseLine is one line of check -json.
type clauseLine struct {
	Clause    string `json:"clause"`
	Title     string `json:"title,omitempty"`
	Status    string `json:"status"`
	Reason    string `json:"reason"`
	ElapsedMS int64  `json:"elapsed_ms"`
}

// checkRun is one run of check: its flags, the suite's config, and
// where it prints.
type checkRun struct {
	only        string
	verbose     bool
	json        bool
	granularity time.Duration

	cfg            conformance.Config
	ids            []string // the clauses to run; nil: every one
	shown          string   // the URL as it may be shown, password redacted
	stdout, stderr io.Writer
}

// runCheck runs "fleetstore check [flags] [URL]" and returns the exit
// status.
func runCheck(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := &checkRun{stdout: stdout, stderr: stderr}
	fs := c.flagSet()
	positional, err := parseArgs(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		printUsage(stdout, checkUsage, fs)
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "fleetstore check: %v (fleetstore help check lists the flags)\n", err)
		return exitUsage
	}
	raw, err := storeURL(positional)
	if err != nil {
		fmt.Fprintf(stderr, "fleetstore check: %v\n", err)
		return exitUsage
	}
	if code := c.prepare(ctx, raw); code != exitOK {
		return code
	}
	return c.suite(ctx)
}

// flagSet declares c's flags.
func (c *checkRun) flagSet() *flag.FlagSet {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.StringVar(&c.only, "only", "", "comma-separated clause ids to run, e.g. G1,c10 (default all)")
	fs.BoolVar(&c.verbose, "v", false,
		"print every clause's messages, not only those of failures and skips")
	fs.BoolVar(&c.json, "json", false, "print JSON lines, one object per clause (see above)")
	fs.DurationVar(&c.granularity, "granularity", 0,
		"override the store's expiry granularity (default: what the driver declares, else 1ms)")
	return fs
}

// prepare opens the store at raw, builds the suite's config, and pings
// the store, so that a bad URL is one line and exit status 2, and a store
// that does not answer one line and 3, not a FAIL per clause. The store
// is closed again: the suite opens Stores of its own. It returns exitOK
// when the suite may run.
func (c *checkRun) prepare(ctx context.Context, raw string) int {
	// The URL as given must open: the suite rewrites it (key_prefix).
	st, err := fleetstore.Open(raw)
	if err != nil {
		fmt.Fprintln(c.stderr, oneLine(err)) // "fleetstore: open: …", naming the field, no credentials
		return exitUsage
	}
	c.cfg, c.shown = checkConfig(raw)
	if err := c.applyFlags(); err != nil {
		st.Close()
		fmt.Fprintf(c.stderr, "fleetstore check: %v\n", err)
		return exitUsage
	}
	err = ping(ctx, st)
	st.Close()
	if ctx.Err() != nil {
		fmt.Fprintln(c.stderr, "fleetstore check: interrupted")
		return exitInterrupted
	}
	if err != nil {
		status, phrase := pingVerdict(err)
		if c.json {
			writeJSONLine(c.stdout, clauseLine{Clause: "ping", Status: status, Reason: oneLine(err)})
		} else {
			fmt.Fprintf(c.stderr, "fleetstore check %s: %s, nothing checked: %s\n", c.shown, phrase,
				oneLine(err))
		}
		return exitUnreachable
	}
	return exitOK
}

// applyFlags puts -granularity and -only into the suite's config. They
// are checked after the URL opens, so that a bad URL is the error named
// first.
func (c *checkRun) applyFlags() error {
	if c.granularity < 0 || c.granularity > conformance.MaxGranularity {
		return fmt.Errorf("-granularity: want 0 (the driver's) up to %v, got %v",
			conformance.MaxGranularity, c.granularity)
	}
	if c.granularity > 0 {
		c.cfg.Granularity = c.granularity
	}
	ids, err := clauseIDs(c.only)
	if err != nil {
		return fmt.Errorf("-only: %w", err)
	}
	c.ids = ids
	return nil
}

// suite runs the conformance suite, printing each verdict as it is in,
// then the counts, and returns the exit status.
func (c *checkRun) suite(ctx context.Context) int {
	if !c.json {
		fmt.Fprintf(c.stdout, "fleetstore check %s\n", c.shown)
	}
	counts := map[conformance.Status]int{}
	start := time.Now()
	reports, done := c.start(ctx)
	var err error
wait:
	for {
		select {
		case r := <-reports:
			counts[r.Status]++
			c.print(r)
		case err = <-done:
			break wait
		case <-ctx.Done():
			fmt.Fprintf(c.stderr, "fleetstore check: interrupted after %d passed, %d failed, %d skipped\n",
				counts[conformance.Pass], counts[conformance.Fail], counts[conformance.Skip])
			return exitInterrupted
		}
	}
	if err != nil {
		fmt.Fprintf(c.stderr, "fleetstore check: %v\n", err)
		return exitUsage
	}
	if !c.json {
		fmt.Fprintf(c.stdout, "%d passed, %d failed, %d skipped in %v\n",
			counts[conformance.Pass], counts[conformance.Fail], counts[conformance.Skip],
			time.Since(start).Round(time.Millisecond))
	}
	if counts[conformance.Fail] > 0 {
		return exitFail
	}
	return exitOK
}

// start runs the suite in a goroutine and hands each report over as it
// is in, then the suite's error. The suite takes no context: at Ctrl-C
// the command returns without waiting for it, and the process exits
// with it.
func (c *checkRun) start(ctx context.Context) (<-chan conformance.Report, <-chan error) {
	done := make(chan error, 1)
	reports := make(chan conformance.Report)
	go func() {
		_, err := conformance.Check(c.cfg, c.ids, func(r conformance.Report) {
			select {
			case reports <- r:
			case <-ctx.Done():
			}
		})
		done <- err
	}()
	return reports, done
}

// print writes one clause's verdict: a JSON line with -json, else a text
// line and, for a failure or a skip (any clause with -v), its messages
// indented below it.
func (c *checkRun) print(r conformance.Report) {
	if c.json {
		line := clauseLine{Clause: r.ID, Title: r.Title, Status: string(r.Status),
			ElapsedMS: r.Elapsed.Milliseconds()}
		if r.Status != conformance.Pass || c.verbose {
			line.Reason = strings.Join(r.Messages, "\n")
		}
		writeJSONLine(c.stdout, line)
		return
	}
	fmt.Fprintf(c.stdout, "%-4s  %-3s  %7v  %s\n",
		r.Status, r.ID, r.Elapsed.Round(time.Millisecond), r.Title)
	if r.Status != conformance.Pass || c.verbose {
		for _, m := range r.Messages {
			const indent = "                    "
			fmt.Fprintf(c.stdout, indent+"%s\n", strings.ReplaceAll(m, "\n", "\n"+indent))
		}
	}
}

// ping reports whether the store answers Store.Ping within pingTries
// tries, each within the store's timeout: the error of the last try, or
// nil. Ping writes nothing and takes no claim.
func ping(ctx context.Context, st *fleetstore.Store) error {
	var err error
	for range pingTries {
		if err = st.Ping(ctx); err == nil || ctx.Err() != nil {
			return err
		}
	}
	return err
}

// pingVerdict names a failed ping: "UNREACHABLE", "store unreachable"
// when the store did not answer (ErrUnavailable, ErrTimeout); else
// "REFUSED", "store refused the ping" — it answered with an error (a wrong
// password, an ACL that forbids PING). A server's error reply
// (driver.ReplyError) matches ErrUnavailable too, so it is looked for
// first. Both exit with exitUnreachable.
func pingVerdict(err error) (status, phrase string) {
	var reply *driver.ReplyError
	out := errors.Is(err, fleetstore.ErrUnavailable) || errors.Is(err, fleetstore.ErrTimeout)
	if !errors.As(err, &reply) && out {
		return "UNREACHABLE", "store unreachable"
	}
	return "REFUSED", "store refused the ping"
}

// oneLine is err's text on one line: a client library's joined errors
// (go-redis joins a Sentinel's dial errors with newlines) folded with "; ".
func oneLine(err error) string {
	newline := func(r rune) bool { return r == '\n' || r == '\r' }
	return strings.Join(strings.FieldsFunc(err.Error(), newline), "; ")
}

// clauseIDs splits -only into clause ids, upper-cased ("g1" is G1).
// Empty means every clause (nil). The error names an id that is none.
func clauseIDs(only string) ([]string, error) {
	if only == "" {
		return nil, nil
	}
	ids := strings.Split(only, ",")
	for i, id := range ids {
		ids[i] = strings.ToUpper(strings.TrimSpace(id))
		if !slices.Contains(conformance.Clauses(), ids[i]) {
			return nil, fmt.Errorf("no clause %q (have %s)", id, strings.Join(conformance.Clauses(), ","))
		}
	}
	return ids, nil
}

// writeJSONLine writes v as one line of JSON, '<' and '>' as they are.
func writeJSONLine(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // strings and ints: never fails; a write error shows as a short stdout
}

// checkConfig builds the suite's config for a URL given on the command
// line (already opened once, so well formed), and the URL as it may be
// shown (password redacted).
//
// A bare memory:// is private to each Open, so the suite gets a named one
// that its Stores share, and the memory driver's records for G7. Any
// other URL is the suite's as it is: the suite aims a copy of it, its
// host swapped, at addresses of its own (T1–T4, V4), and the driver
// declares its expiry granularity.
func checkConfig(raw string) (conformance.Config, string) {
	shown := redactURL(raw)
	if scheme, rest, _ := strings.Cut(raw, "://"); strings.EqualFold(scheme, "memory") {
		name, tail, _ := strings.Cut(rest, "?")
		if name == "" {
			name = "check"
		}
		if tail != "" {
			tail = "?" + tail
		}
		return conformance.Config{URL: "memory://" + name + tail, Records: memory.Default.Records}, shown
	}
	return conformance.Config{URL: raw}, shown
}
