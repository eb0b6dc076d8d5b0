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

// sendFlags are send's flags.
type sendFlags struct {
	provider, target      string
	secretEnv, secretFile string
	id                    string
	timeout               time.Duration
	header                stringsFlag
}

// runSend runs "fleetstore send [flags] [BODY | @FILE]" and returns the
// exit status: every error before the request is sent is a bad flag or
// body (exit status 2), so that 3 means only that nothing answered.
func runSend(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	var f sendFlags
	fs := f.flagSet()
	positional, err := parseArgs(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		printUsage(stdout, sendUsage, fs)
		return exitOK
	}
	var req *http.Request
	if err == nil {
		err = f.check(positional)
	}
	if err == nil {
		req, err = f.request(positional, stdin)
	}
	if err != nil {
		fmt.Fprintf(stderr, "fleetstore send: %v\n", err)
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		fmt.Fprintf(stderr, "fleetstore send: %v\n", err)
		return exitUnreachable
	}
	defer resp.Body.Close()
	printAnswer(stdout, resp)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return exitFail
	}
	return exitOK
}

// flagSet declares f's flags.
func (f *sendFlags) flagSet() *flag.FlagSet {
	fs := flag.NewFlagSet("send", flag.ContinueOnError)
	fs.StringVar(&f.provider, "provider", "", "the provider: "+strings.Join(webhooktest.Providers(), ", "))
	fs.StringVar(&f.target, "url", "", "the endpoint: http://127.0.0.1:8080/hooks/github/acme")
	fs.StringVar(&f.secretEnv, "secret-env", "", "the environment variable holding the signing secret")
	fs.StringVar(&f.secretFile, "secret-file", "", "the file holding the signing secret")
	fs.StringVar(&f.id, "id", "", "the event id, for a provider that carries it in a header (default: a new one)")
	fs.DurationVar(&f.timeout, "timeout", 10*time.Second, "the request's timeout")
	fs.Var(&f.header, "H", `a header field to add, "Name: value" (repeatable)`)
	return fs
}

// check checks the flags that need nothing read: a missing -provider or
// -url is refused before send waits on standard input for a body.
func (f *sendFlags) check(positional []string) error {
	switch {
	case len(positional) > 1:
		return fmt.Errorf("takes at most one body, got %d arguments", len(positional))
	case f.provider == "":
		return fmt.Errorf("-provider: required (%s)", strings.Join(webhooktest.Providers(), ", "))
	case !slices.Contains(webhooktest.Providers(), f.provider):
		return fmt.Errorf("-provider: want one of %s", strings.Join(webhooktest.Providers(), ", "))
	case f.target == "":
		return errors.New("-url: required")
	case !httpURL(f.target):
		return errors.New("-url: want an http:// or https:// URL with a host, such as http://127.0.0.1:8080/hooks/github/acme")
	case (f.secretEnv == "") == (f.secretFile == ""):
		return errors.New("one of -secret-env and -secret-file: the signing secret")
	}
	return nil
}

// request is the delivery signed as f.provider signs it: the secret, the
// body, then the -H fields.
func (f *sendFlags) request(positional []string, stdin io.Reader) (*http.Request, error) {
	secret, err := f.secret()
	if err != nil {
		return nil, err
	}
	body, err := readBody(positional, stdin)
	if err != nil {
		return nil, err
	}
	d := webhooktest.Delivery{URL: f.target, Body: body, Secret: secret, ID: f.id, Header: http.Header{}}
	for _, h := range f.header {
		name, value, ok := strings.Cut(h, ":")
		if !ok || strings.TrimSpace(name) == "" {
			return nil, errors.New(`-H: want "Name: value"`)
		}
		d.Header.Add(strings.TrimSpace(name), strings.TrimSpace(value))
	}
	return webhooktest.Sign(f.provider, d)
}

// secret reads the signing secret as serve reads a config file's ref.
// Its error is only readRef's why: there is no config file to name.
func (f *sendFlags) secret() (string, error) {
	ref := "env:" + f.secretEnv
	if f.secretFile != "" {
		ref = "file:" + f.secretFile
	}
	secret, err := readRef("secret", ref)
	var ce *configError
	if errors.As(err, &ce) {
		return "", errors.New(ce.why)
	}
	return secret, err
}

// readBody reads the body: the argument itself, @FILE a file's content,
// none or @- standard input.
func readBody(positional []string, stdin io.Reader) ([]byte, error) {
	switch {
	case len(positional) == 1 && !strings.HasPrefix(positional[0], "@"):
		return []byte(positional[0]), nil
	case len(positional) == 1 && positional[0] != "@-":
		body, err := os.ReadFile(positional[0][1:])
		if err != nil {
			return nil, fmt.Errorf("body: %w", err)
		}
		return body, nil
	}
	body, err := io.ReadAll(stdin)
	if err != nil {
		return nil, fmt.Errorf("body: reading standard input: %w", err)
	}
	return body, nil
}

// printAnswer prints the answer's status line, its rate-limit fields and
// up to 64 KiB of its body: what a sender needs to see why it was
// answered so.
func printAnswer(w io.Writer, resp *http.Response) {
	fmt.Fprintf(w, "%s %s\n", resp.Proto, resp.Status)
	for _, name := range []string{"RateLimit-Policy", "RateLimit", "Retry-After"} {
		for _, v := range resp.Header.Values(name) {
			fmt.Fprintf(w, "%s: %s\n", name, v)
		}
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if len(b) > 0 {
		fmt.Fprintf(w, "\n%s", b)
		if b[len(b)-1] != '\n' {
			fmt.Fprintln(w)
		}
	}
}

// httpURL reports whether s is an http or https URL with a host.
func httpURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}
