package main

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/conformance"
	"github.com/fleetstore/fleetstore/drivers/memory"
)

const checkUsage = `usage: fleetstore check [flags] [URL]

Runs every clause of the contract (G1–G10, C1–C10, T1–T6, V1–V4) against the
store and prints PASS, FAIL or SKIP for each, with the reason. Exit status 0
when nothing failed, 1 when a clause failed, 2 for a bad URL or flag.

It writes only under a random key_prefix and random tenants; it never
flushes the store. The clauses that need another address (T1–T4, V4) point
the driver at listeners of their own on 127.0.0.1.

flags:
`

// runCheck runs "fleetstore check [flags] [URL]" and returns the exit
// status.
func runCheck(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	only := fs.String("only", "", "comma-separated clause ids to run, e.g. G1,C10 (default all)")
	verbose := fs.Bool("v", false, "print every clause's messages, not only those of failures and skips")
	granularity := fs.Duration("granularity", 0, "override the store's expiry granularity (default: what the driver declares, else 1ms)")
	positional, err := parseArgs(fs, args)
	if err == flag.ErrHelp {
		fmt.Fprint(stdout, checkUsage)
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "fleetstore check: %v\n", err)
		return exitUsage
	}
	raw, err := storeURL(positional)
	if err != nil {
		fmt.Fprintf(stderr, "fleetstore check: %v\n", err)
		return exitUsage
	}
	// The URL as given must open: the suite rewrites it (key_prefix).
	st, err := fleetstore.Open(raw)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitUsage
	}
	st.Close()
	cfg, shown, err := checkConfig(raw)
	if err != nil {
		fmt.Fprintf(stderr, "fleetstore check: %v\n", err)
		return exitUsage
	}
	if *granularity < 0 || *granularity > conformance.MaxGranularity {
		fmt.Fprintf(stderr, "fleetstore check: -granularity: want 0 (the driver's) up to %v, got %v\n", conformance.MaxGranularity, *granularity)
		return exitUsage
	}
	if *granularity > 0 {
		cfg.Granularity = *granularity
	}
	var ids []string
	if *only != "" {
		ids = strings.Split(*only, ",")
		for _, id := range ids {
			if !slices.Contains(conformance.Clauses(), id) {
				fmt.Fprintf(stderr, "fleetstore check: -only: no clause %q (have %s)\n", id, strings.Join(conformance.Clauses(), ","))
				return exitUsage
			}
		}
	}

	fmt.Fprintf(stdout, "fleetstore check %s\n", shown)
	counts := map[conformance.Status]int{}
	start := time.Now()
	_, err = conformance.Check(cfg, ids, func(r conformance.Report) {
		counts[r.Status]++
		fmt.Fprintf(stdout, "%-4s  %-3s  %7v  %s\n", r.Status, r.ID, r.Elapsed.Round(time.Millisecond), r.Title)
		if r.Status != conformance.Pass || *verbose {
			for _, m := range r.Messages {
				fmt.Fprintf(stdout, "                    %s\n", strings.ReplaceAll(m, "\n", "\n                    "))
			}
		}
	})
	if err != nil {
		fmt.Fprintf(stderr, "fleetstore check: %v\n", err)
		return exitUsage
	}
	fmt.Fprintf(stdout, "%d passed, %d failed, %d skipped in %v\n",
		counts[conformance.Pass], counts[conformance.Fail], counts[conformance.Skip], time.Since(start).Round(time.Millisecond))
	if counts[conformance.Fail] > 0 {
		return exitFail
	}
	return exitOK
}

// checkConfig builds the suite's config for a URL given on the command
// line (already opened once, so well formed), and the URL as it may be
// shown (password masked).
//
// A bare memory:// is private to each Open, so the suite gets a named one
// that its Stores share, and the memory driver's records for G7. Any
// other URL is the suite's as it is: the suite aims a copy of it, its
// host swapped, at addresses of its own (T1–T4, V4), and the driver
// declares its expiry granularity. The URL is read as text: url.Parse
// refuses host lists (memcached://h1,h2).
func checkConfig(raw string) (conformance.Config, string, error) {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return conformance.Config{}, "", fmt.Errorf("invalid url: want scheme://host")
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	auth, tail := rest[:end], rest[end:]
	userinfo, host := "", auth
	if at := strings.LastIndexByte(auth, '@'); at >= 0 {
		userinfo, host = auth[:at+1], auth[at+1:]
	}
	shown := raw
	if user, _, hasPassword := strings.Cut(userinfo, ":"); hasPassword {
		shown = scheme + "://" + user + ":xxxxx@" + host + tail
	}
	if scheme == "memory" {
		name := host
		if name == "" {
			name = "check"
		}
		return conformance.Config{URL: scheme + "://" + name + tail, Records: memory.Default.Records}, shown, nil
	}
	return conformance.Config{URL: raw}, shown, nil
}
