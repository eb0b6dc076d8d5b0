package main

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/internal/testing/testserver"
	"github.com/fleetstore/fleetstore/nettest"
)

// secretMark is in every piece of every password the tests below use:
// no output or error may hold it, whatever the password's separators cut
// it into.
const secretMark = "secr"

// secretPasswords are passwords as someone types them into a URL: with
// an unescaped '/', '?', '#', '%' or '@' (which url.Parse cuts apart,
// so that a piece of the password lands in the host, path, query or
// fragment), and plain.
var secretPasswords = []string{
	"SECRet",
	"SECRa/SECRb",
	"SECRa?SECRb",
	"SECRa#SECRb",
	"SECRa%SECRb",
	"SECRa%2xSECRb",
	"SECRa@SECRb",
	"SECRa@SECRb/SECRc",
	"SECRa@SECRb?SECRc=1",
	"SECRa@SECRb?addr=SECRc",
	"SECRa/SECRb?SECRc#SECRd",
	"SECRa:SECRb",
}

// secretUserinfos is each password in the userinfo as typed, with and
// without a user, and percent-encoded as url.UserPassword writes it (the
// well-formed URL, which reaches the drivers' own parsers).
func secretUserinfos() []string {
	var out []string
	for _, pw := range secretPasswords {
		out = append(out, ":"+pw, "default:"+pw, url.UserPassword("default", pw).String())
	}
	return out
}

// secretURLTemplates reach every error path of fleetstore.Open: the
// root's (url.Parse, scheme, fragment, query, timeout, key_prefix,
// fallback_*) and each driver's URL parser (redis/options.go,
// valkey/options.go, memcached, memory). USERINFO is replaced by a
// userinfo of secretUserinfos, QPW by its password query-escaped.
var secretURLTemplates = []string{
	// root: open.go, registry.go, fallback.go
	"redis://USERINFO@h:port/0",
	"redis://USERINFO@h :1/0",
	"redis://USERINFO@[::1/0",
	"redis://USERINFO@h:1/\x01",
	"redis://USERINFO@h:1/0#frag",
	"nosuch://USERINFO@h:1",
	"USERINFO@h:1",
	"redis://USERINFO@h:1/0?a=%zz",
	"redis://USERINFO@h:1/0?a=1;b=2",
	"redis://USERINFO@h:1/0?timeout=1s&timeout=2s",
	"redis://USERINFO@h:1/0?timeout=soon",
	"redis://USERINFO@h:1/0?key_prefix=a{b",
	"redis://USERINFO@h:1/0?fallback_nodes=x",
	"redis://USERINFO@h:1/0?fallback_share=2",
	// drivers/redis/options.go
	"redis://USERINFO@h:1/0?max_retries=1",
	"redis://USERINFO@h:1/0?password=QPW",
	"redis://h:1/0?password=QPW",
	"redis://h:1/0?username=default&password=QPW",
	"redis://USERINFO@h:1/0?bogus=1",
	"redis://USERINFO@h1:1,h2:2/0",
	"redis+cluster://USERINFO@h:1?addr=USERINFO@h2:1",
	"redis+cluster://USERINFO@h:1?addr=h2:1,h3:1",
	"redis://USERINFO@h:1/0?tls_ca_file=/x",
	"redis://USERINFO@/0",
	"redis://USERINFO@h:1/0?master_name=",
	"redis+cluster://USERINFO@h:1?master_name=m",
	"redis://USERINFO@h:1/0?dial_timeout=soon",
	"redis+cluster://USERINFO@h:1/3",
	"redis://USERINFO@h:1/x",
	"redis://USERINFO@h:1/0/1",
	"rediss://USERINFO@h:1/0?tls_ca_file=/nonexistent/ca.pem",
	"redis://USERINFO@h:1/0?pool_size=x",
	"redis://USERINFO@h:1/0?master_name=m&addr=USERINFO@h2:1",
	// drivers/valkey/options.go
	"valkey://USERINFO@h:1/0?bogus=1",
	"valkey://USERINFO@h:1/0?password=QPW",
	"valkey://USERINFO@h1:1,h2:2/0",
	"valkey://USERINFO@h:1?addr=USERINFO@h2:1",
	"valkey://USERINFO@h:1/0?client_cache=1",
	"valkey://USERINFO@h:1/0?max_retries=1",
	"valkey://USERINFO@h:1/0?protocol=9",
	"valkey://USERINFO@h:1/x",
	"valkey://USERINFO@h:1/0?db=x",
	"valkey://USERINFO@h:1?master_set=",
	"valkey://USERINFO@h:1?addr=h2:1&db=x",
	"valkey://USERINFO@h:1/0?tls_ca_file=/x",
	"valkeys://USERINFO@h:1/0?tls_ca_file=/nonexistent/ca.pem",
	"valkey://USERINFO@/0",
	// drivers/memcached
	"memcached://USERINFO@h:1",
	"memcached://USERINFO@h1:1,h2:2",
	"memcached://USERINFO@h:1?max_conns=x",
	"memcached://USERINFO@h:1/path",
	"memcached://h:1?password=QPW",
	"memcacheds://USERINFO@h:1?skip_verify=maybe",
	"memcached://USERINFO@h:1?tls_ca_file=/x",
	// drivers/memory
	"memory://USERINFO@x",
	"memory://USERINFO@x/p",
	"memory://USERINFO@x?bogus=1",
}

// secretURLs is every template with every userinfo.
func secretURLs() []string {
	var out []string
	for _, tmpl := range secretURLTemplates {
		for i, ui := range secretUserinfos() {
			pw := secretPasswords[i/3]
			u := strings.ReplaceAll(tmpl, "USERINFO", ui)
			u = strings.ReplaceAll(u, "QPW", url.QueryEscape(pw))
			if !strings.Contains(strings.ToLower(u), secretMark) {
				continue // a template without a userinfo: once per password is enough
			}
			out = append(out, u)
		}
	}
	return out
}

func noSecret(t *testing.T, what, text string) {
	t.Helper()
	if strings.Contains(strings.ToLower(text), secretMark) {
		t.Errorf("%s holds the password: %q", what, text)
	}
}

// TestOpenNeverEchoesSecret: every error path of fleetstore.Open, fed
// URLs whose password holds every separator url.Parse cuts at, returns
// ErrInvalid or ErrUnknownScheme naming a field and never a piece of the
// password.
func TestOpenNeverEchoesSecret(t *testing.T) {
	urls := secretURLs()
	if len(urls) < len(secretURLTemplates)*len(secretPasswords) {
		t.Fatalf("only %d URLs", len(urls))
	}
	for _, raw := range urls {
		st, err := fleetstore.Open(raw)
		if err == nil {
			st.Close()
			t.Errorf("Open(%q) opened: want every template to be refused", strings.ReplaceAll(strings.ToLower(raw), secretMark, "***"))
			continue
		}
		if !errors.Is(err, fleetstore.ErrInvalid) && !errors.Is(err, fleetstore.ErrUnknownScheme) {
			t.Errorf("Open: %v, want ErrInvalid or ErrUnknownScheme", err)
		}
		noSecret(t, "Open's error", err.Error())
	}
}

// TestCommandNeverEchoesSecret: check and bench, given such a URL as the
// argument, with a second argument, in $FLEETSTORE_URL or in a flag's
// place, print one line on stderr, exit 2, and never a piece of the
// password.
func TestCommandNeverEchoesSecret(t *testing.T) {
	for _, raw := range secretURLs() {
		for _, args := range [][]string{
			{"check", raw},
			{"check", raw, "extra"},
			{"check", "-granularity", raw},
			{"check", "-only", "G1", "-json", raw, "-v=" + raw},
			{"bench", "-d", "10ms", "-ping", "0", raw},
			{"bench", raw, "memory://"},
			{"bench", "-d", raw},
			{"bench", "-max-errors", raw, "memory://"},
			{raw},
			{"help", raw},
		} {
			code, stdout, stderr := runArgs(t, args...)
			if code != exitUsage {
				t.Errorf("%s: exit status %d, want %d", args[0], code, exitUsage)
			}
			noSecret(t, args[0]+" stdout", stdout)
			noSecret(t, args[0]+" stderr", stderr)
		}
		t.Setenv("FLEETSTORE_URL", raw)
		for _, cmd := range []string{"check", "bench"} {
			code, stdout, stderr := runArgs(t, cmd, "-d", "10ms")
			if cmd == "check" {
				code, stdout, stderr = runArgs(t, cmd)
			}
			if code != exitUsage {
				t.Errorf("%s from $FLEETSTORE_URL: exit status %d, want %d", cmd, code, exitUsage)
			}
			noSecret(t, cmd+" stdout", stdout)
			noSecret(t, cmd+" stderr", stderr)
		}
	}
}

// TestDeadServerNeverEchoesSecret: a well-formed URL with a password, at
// a refused address (nettest) and at a killed redis-server, through
// check's ping, bench's errors and bench -fallback's report: the
// password is shown redacted, if at all.
func TestDeadServerNeverEchoesSecret(t *testing.T) {
	killed := testserver.StartRedis(t, testserver.Password("SECRpass"))
	if err := killed.Kill(); err != nil {
		t.Fatal(err)
	}
	for _, addr := range []string{nettest.RefusedAddr(t), killed.Addr} {
		for _, pw := range []string{"SECRpass", "SECRa/SECRb?SECRc#SECRd%SECRe@SECRf"} {
			raw := "redis://" + url.UserPassword("default", pw).String() + "@" + addr + "/0"
			for _, tt := range []struct {
				args []string
				want int
			}{
				{[]string{"check", raw}, exitUnreachable},
				{[]string{"check", "-json", raw}, exitUnreachable},
				{[]string{"bench", "-d", "100ms", "-ping", "10ms", raw}, exitUnreachable},
				{[]string{"bench", "-d", "100ms", "-ping", "10ms", "-json", raw}, exitUnreachable},
				// Decided locally: no call fails.
				{[]string{"bench", "-d", "100ms", "-ping", "10ms", "-fallback", "2", raw}, exitOK},
			} {
				args := tt.args
				code, stdout, stderr := runArgs(t, args...)
				if code != tt.want {
					t.Errorf("%q: exit status %d, want %d", args[:len(args)-1], code, tt.want)
				}
				noSecret(t, args[0]+" stdout", stdout)
				noSecret(t, args[0]+" stderr", stderr)
			}
		}
	}
}

// TestLiveServerRedactsSecret: against a live redis-server with a
// password, bench and check run and show the URL redacted.
func TestLiveServerRedactsSecret(t *testing.T) {
	pw := "SECRa/SECRb?SECRc#SECRd%SECRe@SECRf"
	srv := testserver.StartRedis(t, testserver.Password(pw))
	raw := "redis://" + url.UserPassword("default", pw).String() + "@" + srv.Addr + "/0"
	code, stdout, stderr := runArgs(t, "bench", "-d", "200ms", "-c", "2", "-ping", "20ms", raw)
	if code != exitOK {
		t.Errorf("bench: exit status %d, stderr %q", code, stderr)
	}
	if !strings.Contains(stdout, "default:xxxxx@"+srv.Addr) {
		t.Errorf("bench report does not show the URL redacted:\n%s", stdout)
	}
	noSecret(t, "bench stdout", stdout)
	noSecret(t, "bench stderr", stderr)
	code, stdout, stderr = runArgs(t, "check", "-only", "g1,G2", "-v", raw)
	if code != exitOK || !strings.Contains(stdout, "2 passed") {
		t.Errorf("check: exit status %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	noSecret(t, "check stdout", stdout)
	noSecret(t, "check stderr", stderr)

	wrong := "redis://" + url.UserPassword("default", "SECRwrong").String() + "@" + srv.Addr + "/0"
	code, stdout, stderr = runArgs(t, "check", wrong)
	if code != exitUnreachable {
		t.Errorf("check with a wrong password: exit status %d, want %d; stderr %q", code, exitUnreachable, stderr)
	}
	noSecret(t, "check stdout", stdout)
	noSecret(t, "check stderr", stderr)
}
