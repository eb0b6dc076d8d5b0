// Command fleetstore runs a webhook receiver from a config file, checks a
// store against the contract and measures it under a webhook-edge load.
//
//	fleetstore check [flags] [URL]   run every clause of CONTRACT.md
//	fleetstore bench [flags] [URL]   drive Hit → Commit and print latencies
//	fleetstore serve [-config FILE]  run the webhook receiver of a config file
//	fleetstore send [flags] [BODY]   send one delivery signed as a provider signs it
//	fleetstore version               the build's module version and commit
//	fleetstore help [command]        the usage, or a command's flags
//
// The URL is the argument, else $FLEETSTORE_URL, else memory:// (the
// in-process driver). No output ever holds the URL's password: it is
// shown redacted, and errors name the field, never quote the URL.
//
// Exit statuses: 0 success; 1 the command ran and found a failure (a
// clause failed, bench's error share above -max-errors); 2 bad flags,
// arguments or URL; 3 the store could not be reached or refused the ping
// (check's or bench's Ping failed, every call of a bench run failed); 130
// interrupted (Ctrl-C). serve: 0 after a graceful stop (SIGTERM, Ctrl-C);
// 2 a config file refused; 3 the store, the sink or a listener could not
// be opened.
//
// # serve's config file
//
// YAML, one file for every node of a fleet (examples/fleetstore.yaml,
// examples/fleet.yaml). A field not listed here is refused. No secret is
// written in it: a secret, or a URL with a password, is a ref,
// "env:NAME" (an environment variable) or "file:PATH" (a file's content
// without its trailing newline), read at start and at each reload.
//
//	listen            the endpoints' address (default 127.0.0.1:8080)
//	admin_listen      /metrics, /healthz and /readyz's, when apart
//	node              this node's name in its claims (default the host name)
//	access_log        stdout (default), stderr, off, or a file
//	shutdown_timeout  how long deliveries in flight get at a stop (30s)
//	store.url         the store's URL (any driver), or a ref to it
//	degraded          nodes (the fleet's size), outbox_dir: the degraded mode
//	plans.NAME        a list of limits: {kind, n, per (1s), burst, shadow}
//	                  or {kind, bytes_per_second, burst_bytes}; 64KiB, 8MiB;
//	                  or a quota {kind, n or bytes, per: day, week or
//	                  month, zone (UTC), over: defer, refuse or drop}
//	tenants.NAME      plan, and secrets: provider -> a ref, or a list of
//	                  refs while rotating
//	endpoints         a list of {path, provider}: the tenant is the path's
//	                  {tenant}, or the endpoint's tenant; also tolerance,
//	                  claim_body, defer, max_body, public_url (Twilio)
//	sink              one of file {path, max_bytes, keep} (the default:
//	                  fleetstore-hooks.jsonl), redis {url, stream,
//	                  max_len}, http {url, spool_dir, event_id_header,
//	                  timeout, max_backoff}, postgres {url, table
//	                  (fleetstore_hooks)}
//
// A quota counts n hooks, or bytes of body, per calendar day, ISO week
// or month in its IANA zone. Its over says what happens to a delivery
// over it (package webhook's "Quotas"). defer, the default, stores it
// with over_quota naming the quota, for the application to bill or drop.
// refuse answers 429 with a Retry-After to the window's end, or stores it
// deferred for a provider that does not retry. drop answers it as
// accepted and stores nothing. A hook stored over a defer quota carries
// over_quota but is not deferred: deferred marks a hook a limit refused.
//
// An endpoint's defer: true treats its provider as one that does not
// retry (webhook.Deferring). A delivery over its rate limits, or over a
// refuse quota, is then stored deferred and answered 2xx, not 429.
//
// The file sink appends a JSON line per hook, fsynced before the sender is
// answered, and renames the file PATH.TIMESTAMP past max_bytes. The redis
// sink XADDs each hook to the stream. The http sink spools each hook to a
// file, fsynced, then POSTs it to the application with its body and
// headers, the event id in event_id_header (default Fleetstore-Event-Id),
// until it answers 2xx, retrying with backoff: at least once.
//
// A hook over a quota carries over_quota, the quotas' kinds: a list in
// the file sink's line, a comma-separated field of the redis sink's
// entry, and a Fleetstore-Over-Quota header in the http sink's request
// and the postgres sink's headers column.
//
// The postgres sink inserts each hook as a row (hook_id, tenant, provider,
// event_id, received, deferred, local, headers as jsonb, body as bytea).
// It commits the hook's claim in the same transaction, by postgres.Settler:
// a crash between the two leaves neither, so the provider's retry is
// stored. Its url is pgx's, a ref when it holds a password, and must name
// the database of store.url. A store on any other driver is refused: the
// claim would commit apart from the row, as with the other sinks. The
// table, NAME or SCHEMA.NAME, is created at start when missing. A failed
// insert or commit rolls both back and answers 503: the provider retries.
// While the database is out, so is the sink: deliveries are 503.
//
// SIGHUP reloads tenants, plans, secrets and endpoints. A change to any
// other field needs a restart: the reload is refused and logged, and the
// running config kept. /readyz answers 200 with
// {"ready","degraded","outbox","outages","spool"}, or 503 while stopping;
// a degraded node is ready (it decides at its share of every limit).
// Each replayed commit that met another hook's claim is an access-log
// line "conflict": one event stored twice, for the application to
// reconcile.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"time"
)

// Exit statuses.
const (
	exitOK          = 0
	exitFail        = 1   // the command ran and found a failure
	exitUsage       = 2   // bad flags, arguments or URL
	exitUnreachable = 3   // the store did not answer: nothing was checked or measured
	exitInterrupted = 130 // Ctrl-C (SIGINT) or SIGTERM, as a shell reports 128+2
)

// defaultURL is the store used when neither an argument nor
// $FLEETSTORE_URL names one.
const defaultURL = "memory://"

const usage = `usage: fleetstore <command> [flags] [URL]

commands:
  check     run every clause of the contract against the store
  bench     drive a webhook-edge load (Hit → Commit) and print latencies
  serve     run the webhook receiver a config file describes
  send      send one signed test delivery to an endpoint
  version   print the build's module version, commit and Go version
  help      print this, or "fleetstore help <command>" for its flags

URL is the argument, else $FLEETSTORE_URL, else memory://. Its password
never appears in any output.

exit status:
  0    success
  1    the command ran and found a failure (a clause failed; bench's
       error share above -max-errors)
  2    bad flags, arguments or URL
  3    the store could not be reached or refused the ping (check's and
       bench's Ping failed; every call of a bench run failed)
  130  interrupted (Ctrl-C)
`

// signalsCaught is called once main catches SIGINT and SIGTERM: a test
// seam (TestCtrlC signals the process only then).
var signalsCaught = func() {}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	signalsCaught()
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run dispatches to a subcommand and returns the exit status. ctx is done
// at Ctrl-C: the command stops, prints what it has and returns
// exitInterrupted.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch cmd, rest := args[0], args[1:]; cmd {
	case "check":
		return runCheck(ctx, rest, stdout, stderr)
	case "bench":
		return runBench(ctx, rest, stdout, stderr)
	case "serve":
		return runServe(ctx, rest, stdout, stderr)
	case "send":
		return runSend(ctx, rest, os.Stdin, stdout, stderr)
	case "version":
		if len(rest) > 0 {
			fmt.Fprintf(stderr, "fleetstore version: takes no arguments, got %d\n", len(rest))
			return exitUsage
		}
		fmt.Fprintln(stdout, version())
		return exitOK
	case "help", "-h", "-help", "--help":
		switch {
		case len(rest) == 0:
			fmt.Fprint(stdout, usage)
			return exitOK
		case len(rest) == 1 && (rest[0] == "check" || rest[0] == "bench" || rest[0] == "serve" || rest[0] == "send"):
			return run(ctx, []string{rest[0], "-h"}, stdout, stderr)
		case len(rest) == 1 && rest[0] == "version":
			fmt.Fprintln(stdout, "usage: fleetstore version\n\nPrints the module version, "+
				"VCS commit and time, and Go version the binary was built with.")
			return exitOK
		}
		if len(rest) > 1 {
			// The arguments are not echoed: one may be a URL.
			fmt.Fprintf(stderr, "fleetstore help: takes at most one command, got %d arguments "+
				"(fleetstore help bench)\n", len(rest))
		} else {
			fmt.Fprintln(stderr, "fleetstore help: no command of that name (want check, bench, serve, send or version)")
		}
		return exitUsage
	default:
		// The command is not echoed: a URL given first would be.
		fmt.Fprintln(stderr, "fleetstore: unknown command (want check, bench, serve, send, version or help)")
		return exitUsage
	}
}

// version describes the build from its build info: the main module's
// version, the VCS commit and time when stamped, and the Go version.
func version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "fleetstore (no build info) " + runtime.Version()
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	v := "fleetstore " + info.Main.Version
	if rev := settings["vcs.revision"]; rev != "" {
		v += " commit " + rev[:min(len(rev), 12)]
		if settings["vcs.modified"] == "true" {
			v += "+dirty"
		}
		if t := settings["vcs.time"]; t != "" {
			v += " " + t
		}
	}
	return v + " " + info.GoVersion + " " + runtime.GOOS + "/" + runtime.GOARCH
}

// storeURL returns the store URL of a subcommand from its positional
// arguments (after flag parsing): the one argument, else $FLEETSTORE_URL,
// else memory://. Its error never quotes an argument: one may be a URL
// with a password.
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
	return "", fmt.Errorf("want at most one URL, got %d arguments (flags go before or after the URL)",
		len(positional))
}

// redactURL is raw with its password replaced by "xxxxx", as
// url.URL.Redacted does, for display. raw has opened, so it is well
// formed; url.Parse still refuses a host list (memcached://h1,h2), which
// is cut by hand at the last '@' of its authority.
func redactURL(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		if _, has := u.User.Password(); !has {
			return raw
		}
		return u.Redacted()
	}
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return "(malformed URL)"
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	at := strings.LastIndexByte(rest[:end], '@')
	if at < 0 {
		return raw
	}
	user, _, hasPassword := strings.Cut(rest[:at], ":")
	if !hasPassword {
		return raw
	}
	return scheme + "://" + user + ":xxxxx@" + rest[at+1:]
}

// parseArgs parses flags that may come before or after the positional
// arguments ("bench -d 5s redis://h" and "bench redis://h -d 5s") and
// returns the positional ones. It prints nothing: the caller reports a
// flag error in one line, and prints the usage on flag.ErrHelp. Its
// errors never quote a flag's value (see flagError).
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, flagError(fs, err)
		}
		args = fs.Args()
		if len(args) == 0 {
			return positional, nil
		}
		positional = append(positional, args[0])
		args = args[1:]
	}
}

// printUsage prints a command's usage text, then its flags and their
// defaults: the answer to -h and to "fleetstore help COMMAND".
func printUsage(w io.Writer, text string, fs *flag.FlagSet) {
	fmt.Fprint(w, text)
	fs.SetOutput(w)
	fs.PrintDefaults()
}

var (
	flagBadValue = regexp.MustCompile(`^invalid (?:boolean )?value .* for (?:flag )?-([\w-]+): `)
	flagName     = regexp.MustCompile(
		`^(flag provided but not defined|flag needs an argument): -([\w-]+)$`)
)

// flagError rewrites a flag package error so that it names the flag but
// quotes no value: "invalid value "redis://:pw@h" for flag -d" would
// print a URL given in a flag's place, password and all.
func flagError(fs *flag.FlagSet, err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return err
	}
	msg := err.Error()
	if m := flagBadValue.FindStringSubmatch(msg); m != nil {
		want := "invalid value"
		if f := fs.Lookup(m[1]); f != nil {
			if g, ok := f.Value.(flag.Getter); ok {
				switch g.Get().(type) {
				case time.Duration:
					want = "want a Go duration such as 10s"
				case int, int64, uint, uint64:
					want = "want an integer"
				case float64:
					want = "want a number"
				case bool:
					want = "want true or false"
				}
			}
		}
		return fmt.Errorf("-%s: %s", m[1], want)
	}
	if m := flagName.FindStringSubmatch(msg); m != nil {
		return fmt.Errorf("%s: -%s", m[1], m[2])
	}
	return errors.New("bad flag syntax")
}
