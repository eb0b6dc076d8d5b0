// Command fleetstore checks a store against the contract and measures it
// under a webhook-edge load.
//
//	fleetstore check [flags] [URL]   run every clause of CONTRACT.md
//	fleetstore bench [flags] [URL]   drive Hit → Commit and print latencies
//
// The URL is the argument, else $FLEETSTORE_URL, else memory:// (the
// in-process driver). A malformed URL, an unknown scheme or an unknown
// parameter is one line on stderr and exit status 2.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
)

// Exit statuses.
const (
	exitOK    = 0
	exitFail  = 1 // the command ran and found a failure
	exitUsage = 2 // bad flags, arguments or URL
)

// defaultURL is the store used when neither an argument nor
// $FLEETSTORE_URL names one.
const defaultURL = "memory://"

const usage = `usage: fleetstore <command> [flags] [URL]

commands:
  check   run every clause of the contract against the store
  bench   drive a webhook-edge load (Hit → Commit) and print latencies

URL is the argument, else $FLEETSTORE_URL, else memory://.
Run "fleetstore <command> -h" for the command's flags.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run dispatches to a subcommand and returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch cmd, rest := args[0], args[1:]; cmd {
	case "check":
		return runCheck(rest, stdout, stderr)
	case "bench":
		return runBench(rest, stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return exitOK
	default:
		fmt.Fprintf(stderr, "fleetstore: unknown command %q (want check or bench)\n", cmd)
		return exitUsage
	}
}

// storeURL returns the store URL of a subcommand from its positional
// arguments (after flag parsing): the one argument, else $FLEETSTORE_URL,
// else memory://.
func storeURL(positional []string) (string, error) {
	switch len(positional) {
	case 0:
		if u := os.Getenv("FLEETSTORE_URL"); u != "" {
			return u, nil
		}
		return defaultURL, nil
	case 1:
		return positional[0], nil
	}
	return "", fmt.Errorf("want at most one URL, got %d arguments: %q", len(positional), positional)
}

// parseArgs parses flags that may come before or after the positional
// arguments ("bench -d 5s redis://h" and "bench redis://h -d 5s") and
// returns the positional ones. It prints nothing: the caller reports a
// flag error in one line, and prints the usage on flag.ErrHelp.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return positional, nil
		}
		positional = append(positional, args[0])
		args = args[1:]
	}
}
