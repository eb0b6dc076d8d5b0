package conformance

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/fleetstore/fleetstore"
)

// callBudget is the per-call budget of stores opened for clauses that are
// not about time: wide enough for a loaded 2-core machine under -race.
const callBudget = 5 * time.Second

// open returns a Store on the suite's URL (shared state, random key_prefix),
// closed when the clause ends.
func (t *clauseT) open(opts ...fleetstore.Option) *fleetstore.Store {
	return t.openURL(t.s.url, append([]fleetstore.Option{fleetstore.WithTimeout(callBudget)},
		opts...)...)
}

func (t *clauseT) openURL(raw string, opts ...fleetstore.Option) *fleetstore.Store {
	st, err := t.s.openStore(raw, opts...)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// openStore opens raw with the configured driver, or by its scheme.
func (s *suite) openStore(raw string, opts ...fleetstore.Option) (*fleetstore.Store, error) {
	if s.cfg.Driver != nil {
		return fleetstore.OpenDriver(s.cfg.Driver, raw, opts...)
	}
	return fleetstore.Open(raw, opts...)
}

// addrURL is the driver's URL for addr with the suite's key_prefix, or ""
// when the suite has no AddrURL (none given, no host:port in the URL).
func (t *clauseT) addrURL(addr string) string {
	if t.s.cfg.AddrURL == nil {
		return ""
	}
	u, err := t.s.withPrefix(t.s.cfg.AddrURL(addr))
	if err != nil {
		t.Fatalf("AddrURL(%q): %v", addr, err)
	}
	return u
}

// serverAddr is the first host:port of the configured URL ("" for none).
func (t *clauseT) serverAddr() string { return firstHostPort(t.s.cfg.URL) }

// firstHostPort is the first host:port of raw's authority, "" when it has
// none (memory://NAME). It reads the authority as text: url.Parse refuses
// host lists.
func firstHostPort(raw string) string {
	_, auth, _ := splitAuthority(raw)
	if at := strings.LastIndexByte(auth, '@'); at >= 0 {
		auth = auth[at+1:]
	}
	host, _, _ := strings.Cut(auth, ",")
	if _, port, err := net.SplitHostPort(host); err != nil || port == "" {
		return ""
	}
	return host
}

// swapHost is the default Config.AddrURL: raw with its host (a host list
// too) and every addr= parameter (a cluster's other seeds) replaced by
// addr, so a cluster URL stays a cluster URL. It keeps raw's user,
// password, path and other parameters.
func swapHost(raw, addr string) string {
	scheme, auth, tail := splitAuthority(raw)
	userinfo := ""
	if at := strings.LastIndexByte(auth, '@'); at >= 0 {
		userinfo = auth[:at+1]
	}
	path, query, _ := strings.Cut(tail, "?")
	q, _ := url.ParseQuery(query) // a bad query fails the suite's own parse
	for i := range q["addr"] {
		q["addr"][i] = addr
	}
	out := scheme + "://" + userinfo + addr + path
	if len(q) > 0 {
		out += "?" + q.Encode()
	}
	return out
}

// splitAuthority cuts raw into its scheme, its authority (userinfo and
// host list) and the rest (path and query); all "" without a "://".
func splitAuthority(raw string) (scheme, auth, tail string) {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return "", "", ""
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	return scheme, rest[:end], rest[end:]
}

// now is the store's time (Config.Clock).
func (t *clauseT) now() time.Time { return t.s.clock.Now() }

// since is the store's time elapsed since start.
func (t *clauseT) since(start time.Time) time.Duration { return t.now().Sub(start) }

// sleep lets d of the store's time pass.
func (t *clauseT) sleep(d time.Duration) { t.s.clock.Sleep(d) }

// tenant returns a fresh tenant name.
func (t *clauseT) tenant() string { return "tenant-" + t.id + "-" + randHex(8) }

func charge(kind fleetstore.Kind, tenant string, inc, capacity time.Duration) fleetstore.Charge {
	return fleetstore.Charge{Kind: kind, Tenant: tenant, Increment: inc, Capacity: capacity}
}

// claimFor returns a claim on a fresh key of tenant by hook.
func (t *clauseT) claimFor(tenant, hook string) fleetstore.Claim {
	return fleetstore.Claim{
		Tenant: tenant, SourceID: "source-" + randHex(4), Key: "evt-" + randHex(8),
		HookID: hook, Node: "node-" + t.id, TTL: time.Hour, PendingTTL: time.Hour,
	}
}

// hit calls Hit and fails the clause on an error.
func (t *clauseT) hit(st *fleetstore.Store, charges []fleetstore.Charge,
	claim *fleetstore.Claim) fleetstore.Result {
	res, err := st.Hit(t.ctx(), charges, claim)
	if err != nil {
		t.Fatalf("hit: unexpected error: %v", err)
	}
	return res
}

// want fails the clause unless res has the outcome, and a retry-after only
// when the outcome waits (Pending, RateLimited).
func (t *clauseT) want(what string, res fleetstore.Result, o fleetstore.Outcome) {
	if res.Outcome != o {
		t.Fatalf("%s: got %s, want %s", what, describe(res), o)
	}
	if (o == fleetstore.OK || o == fleetstore.Duplicate) && res.RetryAfter != 0 {
		t.Errorf("%s: %s with retry-after %v, want none", what, describe(res), res.RetryAfter)
	}
}

func describe(r fleetstore.Result) string {
	switch r.Outcome {
	case fleetstore.Duplicate:
		return fmt.Sprintf("duplicate (hook %q)", r.HookID)
	case fleetstore.Pending, fleetstore.RateLimited:
		return fmt.Sprintf("%s (retry after %v)", r.Outcome, r.RetryAfter)
	}
	return r.Outcome.String()
}

// conforming charges c alone, n times, and returns how many conformed.
func (t *clauseT) conforming(st *fleetstore.Store, c fleetstore.Charge, n int) int {
	ok := 0
	for range n {
		if t.hit(st, []fleetstore.Charge{c}, nil).Outcome == fleetstore.OK {
			ok++
		}
	}
	return ok
}

// wantErr fails the clause unless err matches target.
func (t *clauseT) wantErr(what string, err, target error) {
	if !errors.Is(err, target) {
		t.Fatalf("%s: got error %v, want %v", what, err, target)
	}
}

// within fails the clause unless d is in [lo, hi].
func (t *clauseT) within(what string, d, lo, hi time.Duration) {
	if d < lo || d > hi {
		t.Errorf("%s: %v, want between %v and %v", what, d, lo, hi)
	}
}
