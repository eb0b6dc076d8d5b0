package conformance

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// Main is the conformance check as a command, for a driver's own small
// main: fleetstore check compiles in only this module's drivers, so a
// driver kept elsewhere runs the same check with
//
//	package main
//
//	import (
//		"example.com/mystore"
//		"github.com/fleetstore/fleetstore/conformance"
//	)
//
//	func main() { conformance.Main(conformance.Config{Driver: mystore.Driver{}}) }
//
// and then "go run ./cmd/mycheck mystore://host:port". The URL is the
// command's argument, else cfg.URL, else $FLEETSTORE_URL. Flags: -only
// G1,C10 runs those clauses; -v prints every clause's messages. It prints
// one line per clause, as fleetstore check does, and exits with status 0
// when no clause failed, 1 when one did, 2 on a bad flag or URL.
func Main(cfg Config) {
	os.Exit(RunMain(cfg, os.Args[1:], os.Stdout, os.Stderr))
}

// RunMain is Main with its arguments and output given, returning the exit
// status instead of exiting.
func RunMain(cfg Config, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("conformance", flag.ContinueOnError)
	fs.SetOutput(stderr)
	only := fs.String("only", "", "comma-separated clause ids to run, e.g. G1,C10 (default all)")
	verbose := fs.Bool("v", false, "print every clause's messages, not only those of failures and skips")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	switch {
	case fs.NArg() > 1:
		fmt.Fprintln(stderr, "conformance: one URL, got", fs.NArg(), "arguments")
		return 2
	case fs.NArg() == 1:
		cfg.URL = fs.Arg(0)
	case cfg.URL == "":
		cfg.URL = os.Getenv("FLEETSTORE_URL")
	}
	if cfg.URL == "" {
		fmt.Fprintln(stderr, "conformance: no URL: give it as the argument or in $FLEETSTORE_URL")
		return 2
	}
	var ids []string
	if *only != "" {
		for _, id := range strings.Split(*only, ",") {
			ids = append(ids, strings.ToUpper(strings.TrimSpace(id)))
		}
	}
	failed := 0
	counts := map[Status]int{}
	start := time.Now()
	_, err := Check(cfg, ids, func(r Report) {
		counts[r.Status]++
		fmt.Fprintf(stdout, "%-4s  %-3s  %7v  %s\n", r.Status, r.ID, r.Elapsed.Round(time.Millisecond), r.Title)
		if r.Status != Pass || *verbose {
			const indent = "                    "
			for _, m := range r.Messages {
				fmt.Fprintf(stdout, indent+"%s\n", strings.ReplaceAll(m, "\n", "\n"+indent))
			}
		}
		if r.Status == Fail {
			failed++
		}
	})
	if err != nil {
		fmt.Fprintln(stderr, err) // names the field; Open's errors quote no URL
		return 2
	}
	fmt.Fprintf(stdout, "%d passed, %d failed, %d skipped in %v\n", counts[Pass], counts[Fail], counts[Skip],
		time.Since(start).Round(time.Millisecond))
	if failed > 0 {
		return 1
	}
	return 0
}
