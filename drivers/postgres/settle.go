package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fleetstore/fleetstore/driver"
)

// Commit implements driver.Conn (C5–C8, C10), in a round of group commit
// (group.go).
func (c *conn) Commit(ctx context.Context, claims []driver.Claim) ([]error, error) {
	return c.settle(ctx, true, claims)
}

// Release implements driver.Conn (C5–C8, C10), in a round of group commit.
func (c *conn) Release(ctx context.Context, claims []driver.Claim) ([]error, error) {
	return c.settle(ctx, false, claims)
}

// settleResult is one settle call's results.
type settleResult struct {
	errs []error
	err  error
}

// sendRound settles the claims of calls in one call of settle_v1.
func (c *conn) sendRound(ctx context.Context, calls []*settleCall) []settleResult {
	var a settleArgs
	for _, s := range calls {
		for i := range s.claims {
			a.add(c.prefix, s.commit, &s.claims[i])
		}
	}
	out := make([]settleResult, len(calls))
	var codes []int32
	var holders [][]byte
	err := c.queryRow(ctx, c.q.settle, a.sorted(), &codes, &holders)
	var errs []error
	if err == nil {
		errs, err = a.results(codes, holders)
	}
	if err != nil {
		for i := range out {
			out[i].err = err
		}
		return out
	}
	for i, s := range calls {
		out[i].errs, errs = errs[:s.n:s.n], errs[s.n:]
	}
	return out
}

// settleArgs are the arrays of a settle_v1 call.
type settleArgs struct {
	commit []bool
	ids    [][]byte
	tkeys  []int64
	hooks  [][]byte
	nodes  [][]byte
	ttls   []int64
	order  []int // order[j]: the claim sent j-th
}

func (a *settleArgs) add(prefix string, commit bool, cl *driver.Claim) {
	a.commit = append(a.commit, commit)
	a.ids = append(a.ids, claimID(prefix, cl))
	a.tkeys = append(a.tkeys, tenantKey(prefix, cl.Tenant))
	a.hooks = append(a.hooks, []byte(cl.HookID))
	a.nodes = append(a.nodes, []byte(cl.Node))
	a.ttls = append(a.ttls, cl.TTL.Microseconds())
}

// sorted returns the arguments in the order of the claims' ids (two
// settles of one key keep theirs), so that concurrent rounds lock rows in
// one order and never deadlock.
func (a *settleArgs) sorted() []any {
	n := len(a.ids)
	a.order = make([]int, n)
	for i := range a.order {
		a.order[i] = i
	}
	slices.SortStableFunc(a.order, func(x, y int) int { return bytes.Compare(a.ids[x], a.ids[y]) })
	commit, ids, tkeys := make([]bool, n), make([][]byte, n), make([]int64, n)
	hooks, nodes, ttls := make([][]byte, n), make([][]byte, n), make([]int64, n)
	for j, i := range a.order {
		commit[j], ids[j], tkeys[j], hooks[j], nodes[j], ttls[j] =
			a.commit[i], a.ids[i], a.tkeys[i], a.hooks[i], a.nodes[i], a.ttls[i]
	}
	return []any{commit, ids, tkeys, hooks, nodes, ttls}
}

// results turns settle_v1's codes into one error per claim, in the
// claims' own order.
func (a *settleArgs) results(codes []int32, holders [][]byte) ([]error, error) {
	if len(codes) != len(a.ids) || len(holders) > len(codes) {
		return nil, driver.ErrorReply(errors.New("postgres: malformed settle_v1 answer"))
	}
	errs := make([]error, len(codes))
	for j, code := range codes {
		i := a.order[j]
		switch code {
		case 0:
		case 1:
			var h []byte
			if j < len(holders) {
				h = holders[j]
			}
			errs[i] = &driver.ClaimLostError{Holder: string(h)}
		case 2:
			errs[i] = driver.ErrAlreadyCommitted
		default:
			return nil, driver.ErrorReply(errors.New("postgres: malformed settle_v1 answer"))
		}
	}
	return errs, nil
}

// Settler commits and releases claims inside a transaction of the
// application's (a pgx.Tx), so that what the application writes there —
// the hook it received — and the claim commit or roll back together: a
// crash between the two leaves neither, and a redelivery after the
// commit is a Duplicate. It settles the claims of the Stores opened on
// the same URL (the same database, schema and key_prefix), by the rules of
// the Store's Commit and Release (CONTRACT C5–C8): fencing holds inside the
// transaction (a claim held by another hook is ErrClaimLost, and changes
// nothing), and until the transaction ends the claim's row is locked:
// another settle of it waits, and a Hit of it waits or, when it holds
// the claim pending, answers Pending.
//
// The claim is read and written when the statement runs, so a claim
// that expired while the transaction ran is committed anew (C7). Keep
// the transaction shorter than the claim's PendingTTL.
type Settler struct {
	prefix string
	q      queries
}

// NewSettler returns the Settler of the Stores opened on rawURL: it reads
// key_prefix and schema from it and ignores the rest (no connection is
// made; the transaction's is used). Errors wrap ErrInvalid and name the
// parameter.
func NewSettler(rawURL string) (*Settler, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, driver.Invalid("url", "not a URL")
	}
	q := u.Query()
	for _, name := range []string{"key_prefix", "schema"} {
		if len(q[name]) > 1 {
			return nil, driver.Invalid("url: "+name, "given more than once")
		}
	}
	prefix := "fleetstore"
	if q.Has("key_prefix") {
		prefix = q.Get("key_prefix")
		if !validPrefix(prefix) {
			return nil, driver.Invalid("url: key_prefix", "want 1–64 bytes of letters, digits and _-.:/, got "+
				driver.Quote(prefix))
		}
	}
	schema := "fleetstore"
	if q.Has("schema") {
		schema = q.Get("schema")
		if !validSchema(schema) {
			return nil, driver.Invalid("url: schema", "want [a-z_][a-z0-9_]{0,62}, got "+driver.Quote(schema))
		}
	}
	return &Settler{prefix: prefix, q: newQueries(schema)}, nil
}

func validPrefix(p string) bool {
	if p == "" || len(p) > 64 {
		return false
	}
	for _, c := range []byte(p) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '_' || c == '-' || c == '.' || c == ':' || c == '/'
		if !ok {
			return false
		}
	}
	return true
}

// Commit commits claims in tx (C5–C7), in one statement: each needs its
// TTL. A claim held by another hook is not committed and its error
// matches ErrClaimLost (C8). Per-claim failures are joined, one
// *driver.ClaimError each, as the Store's Commit returns them; the others
// are committed with tx. A failure of the statement is returned as it is
// (the transaction is then aborted: roll it back). Bad claims, or a nil
// tx, are an ErrInvalid naming the field, and nothing is sent.
func (s *Settler) Commit(ctx context.Context, tx pgx.Tx, claims ...driver.Claim) error {
	return s.settle(ctx, tx, true, claims)
}

// Release releases claims in tx, as Commit commits them (C5–C8): a claim
// this hook committed is ErrAlreadyCommitted.
func (s *Settler) Release(ctx context.Context, tx pgx.Tx, claims ...driver.Claim) error {
	return s.settle(ctx, tx, false, claims)
}

func (s *Settler) settle(ctx context.Context, tx pgx.Tx, commit bool, claims []driver.Claim) error {
	if tx == nil {
		return driver.Invalid("tx", "is nil")
	}
	if len(claims) == 0 {
		return nil
	}
	for i := range claims {
		if err := checkClaim(i, &claims[i], commit); err != nil {
			return err
		}
	}
	var a settleArgs
	for i := range claims {
		a.add(s.prefix, commit, &claims[i])
	}
	var codes []int32
	var holders [][]byte
	if err := tx.QueryRow(ctx, s.q.settle, a.sorted()...).Scan(&codes, &holders); err != nil {
		return fmt.Errorf("postgres: settle in the caller's transaction: %w", mark(err))
	}
	errs, err := a.results(codes, holders)
	if err != nil {
		return err
	}
	var failed []error
	for i, e := range errs {
		if e != nil {
			c := claims[i]
			failed = append(failed, &driver.ClaimError{Index: i, Tenant: c.Tenant, SourceID: c.SourceID,
				Key: c.Key, Err: e})
		}
	}
	return errors.Join(failed...)
}

// checkClaim checks claims[i] as the Store's Commit and Release do
// (CONTRACT §6).
func checkClaim(i int, c *driver.Claim, commit bool) error {
	field := "claims[" + strconv.Itoa(i) + "]."
	for _, p := range []struct{ name, v string }{{"tenant", c.Tenant}, {"source_id", c.SourceID}, {"key", c.Key}} {
		if len(p.v) < 1 || len(p.v) > driver.MaxPartLen {
			return driver.Invalid(field+p.name, "must be 1–1024 bytes, got "+strconv.Itoa(len(p.v)))
		}
	}
	if len(c.HookID) < 1 || len(c.HookID) > driver.MaxHookIDLen {
		return driver.Invalid(field+"hook_id", "must be 1–256 bytes, got "+strconv.Itoa(len(c.HookID)))
	}
	if len(c.Node) > driver.MaxNodeLen {
		return driver.Invalid(field+"node", "must be at most 256 bytes, got "+strconv.Itoa(len(c.Node)))
	}
	if commit && (c.TTL < driver.MinTTL || c.TTL > driver.MaxTTL) {
		return driver.Invalid(field+"ttl", "must be 1ms–366 days, got "+c.TTL.Truncate(time.Microsecond).String())
	}
	return nil
}
