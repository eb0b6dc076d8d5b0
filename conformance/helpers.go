package conformance

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/fleetstore/fleetstore"
)

// callBudget is the per-call budget of stores opened for clauses that are
// not about time: wide enough for a loaded 2-core machine under -race.
const callBudget = 5 * time.Second

// open returns a Store on the suite's URL (shared state, random key_prefix),
// closed when the clause ends.
func (t *T) open(opts ...fleetstore.Option) *fleetstore.Store {
	return t.openURL(t.s.url, append([]fleetstore.Option{fleetstore.WithTimeout(callBudget)}, opts...)...)
}

func (t *T) openURL(raw string, opts ...fleetstore.Option) *fleetstore.Store {
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
// when the config has no AddrURL.
func (t *T) addrURL(addr string) string {
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
// It reads the authority as text: url.Parse refuses host lists.
func (t *T) serverAddr() string {
	_, rest, ok := strings.Cut(t.s.cfg.URL, "://")
	if !ok {
		return ""
	}
	if end := strings.IndexAny(rest, "/?#"); end >= 0 {
		rest = rest[:end]
	}
	if at := strings.LastIndexByte(rest, '@'); at >= 0 {
		rest = rest[at+1:]
	}
	host, _, _ := strings.Cut(rest, ",")
	if _, port, err := net.SplitHostPort(host); err != nil || port == "" {
		return ""
	}
	return host
}

// tenant returns a fresh tenant name.
func (t *T) tenant() string { return "tenant-" + t.id + "-" + randHex(8) }

func charge(kind fleetstore.Kind, tenant string, inc, capacity time.Duration) fleetstore.Charge {
	return fleetstore.Charge{Kind: kind, Tenant: tenant, Increment: inc, Capacity: capacity}
}

// claimFor returns a claim on a fresh key of tenant by hook.
func (t *T) claimFor(tenant, hook string) fleetstore.Claim {
	return fleetstore.Claim{
		Tenant: tenant, SourceID: "source-" + randHex(4), Key: "evt-" + randHex(8),
		HookID: hook, Node: "node-" + t.id, TTL: time.Hour, PendingTTL: time.Hour,
	}
}

// hit calls Hit and fails the clause on an error.
func (t *T) hit(st *fleetstore.Store, charges []fleetstore.Charge, claim *fleetstore.Claim) fleetstore.Result {
	res, err := st.Hit(t.ctx(), charges, claim)
	if err != nil {
		t.Fatalf("hit: unexpected error: %v", err)
	}
	return res
}

// want fails the clause unless res has the outcome, and a retry-after only
// when the outcome waits (Pending, RateLimited).
func (t *T) want(what string, res fleetstore.Result, o fleetstore.Outcome) {
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
func (t *T) conforming(st *fleetstore.Store, c fleetstore.Charge, n int) int {
	ok := 0
	for range n {
		if t.hit(st, []fleetstore.Charge{c}, nil).Outcome == fleetstore.OK {
			ok++
		}
	}
	return ok
}

// wantErr fails the clause unless err matches target.
func (t *T) wantErr(what string, err, target error) {
	if !errors.Is(err, target) {
		t.Fatalf("%s: got error %v, want %v", what, err, target)
	}
}

// within fails the clause unless d is in [lo, hi].
func (t *T) within(what string, d, lo, hi time.Duration) {
	if d < lo || d > hi {
		t.Errorf("%s: %v, want between %v and %v", what, d, lo, hi)
	}
}
