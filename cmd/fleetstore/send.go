package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/fleetstore/fleetstore/webhook/webhooktest"
)

const sendUsage = `usage: fleetstore send -provider NAME -url URL (-secret-env NAME | -secret-file PATH) [flags] [BODY | @FILE]

Sends one delivery signed as the provider signs it (package
webhook/webhooktest) and prints the answer's status line, its RateLimit
and Retry-After fields, and its body. BODY is the body itself, @FILE a
file's content, none or @- standard input. The secret is read from an
environment variable or a file, never from a flag's value (which a
process list shows).

exit status: 0 answered 2xx; 1 answered otherwise; 2 bad flags;
3 no answer.

flags:
`

// stringsFlag is a repeatable flag.
type stringsFlag []string

func (s *stringsFlag) String() string     { return strings.Join(*s, ", ") }
func (s *stringsFlag) Set(v string) error { *s = append(*s, v); return nil }

func runSend(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("send", flag.ContinueOnError)
	provider := fs.String("provider", "", "the provider: "+strings.Join(webhooktest.Providers(), ", "))
	target := fs.String("url", "", "the endpoint: http://127.0.0.1:8080/hooks/github/acme")
	secretEnv := fs.String("secret-env", "", "the environment variable holding the signing secret")
	secretFile := fs.String("secret-file", "", "the file holding the signing secret")
	id := fs.String("id", "", "the event id, for a provider that carries it in a header (default: a new one)")
	timeout := fs.Duration("timeout", 10*time.Second, "the request's timeout")
	var header stringsFlag
	fs.Var(&header, "H", `a header field to add, "Name: value" (repeatable)`)
	positional, err := parseArgs(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		printUsage(stdout, sendUsage, fs)
		return exitOK
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "fleetstore send: "+format+"\n", a...)
		return exitUsage
	}
	switch {
	case err != nil:
		return fail("%v", err)
	case len(positional) > 1:
		return fail("takes at most one body, got %d arguments", len(positional))
	case *provider == "":
		return fail("-provider: required (%s)", strings.Join(webhooktest.Providers(), ", "))
	case !slices.Contains(webhooktest.Providers(), *provider):
		return fail("-provider: want one of %s", strings.Join(webhooktest.Providers(), ", "))
	case *target == "":
		return fail("-url: required")
	case !httpURL(*target):
		return fail("-url: want an http:// or https:// URL with a host, such as http://127.0.0.1:8080/hooks/github/acme")
	case (*secretEnv == "") == (*secretFile == ""):
		return fail("one of -secret-env and -secret-file: the signing secret")
	}
	ref := "env:" + *secretEnv
	if *secretFile != "" {
		ref = "file:" + *secretFile
	}
	secret, err := readRef("secret", ref)
	if err != nil {
		var ce *configError
		if errors.As(err, &ce) {
			return fail("%s", ce.why)
		}
		return fail("%v", err)
	}
	var body []byte
	switch arg := ""; {
	case len(positional) == 1 && !strings.HasPrefix(positional[0], "@"):
		body = []byte(positional[0])
	case len(positional) == 1 && positional[0] != "@-":
		arg = positional[0][1:]
		if body, err = os.ReadFile(arg); err != nil {
			return fail("body: %v", err)
		}
	default:
		if body, err = io.ReadAll(stdin); err != nil {
			return fail("body: reading standard input: %v", err)
		}
	}
	d := webhooktest.Delivery{URL: *target, Body: body, Secret: secret, ID: *id, Header: http.Header{}}
	for _, h := range header {
		name, value, ok := strings.Cut(h, ":")
		if !ok || strings.TrimSpace(name) == "" {
			return fail(`-H: want "Name: value"`)
		}
		d.Header.Add(strings.TrimSpace(name), strings.TrimSpace(value))
	}
	req, err := webhooktest.Sign(*provider, d)
	if err != nil {
		return fail("%v", err)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		fmt.Fprintf(stderr, "fleetstore send: %v\n", err)
		return exitUnreachable
	}
	defer resp.Body.Close()
	fmt.Fprintf(stdout, "%s %s\n", resp.Proto, resp.Status)
	for _, name := range []string{"RateLimit-Policy", "RateLimit", "Retry-After"} {
		for _, v := range resp.Header.Values(name) {
			fmt.Fprintf(stdout, "%s: %s\n", name, v)
		}
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if len(b) > 0 {
		fmt.Fprintf(stdout, "\n%s", b)
		if b[len(b)-1] != '\n' {
			fmt.Fprintln(stdout)
		}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return exitFail
	}
	return exitOK
}

// httpURL reports whether s is an http or https URL with a host.
func httpURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}
