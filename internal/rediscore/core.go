// Package rediscore is the driver logic the Redis and Valkey drivers
// share: it implements driver.Conn over a small [Client] adapter per
// client library (go-redis, valkey-go). Hits, Commits and Releases go in
// rounds (group.go): a call that finds no round in flight is sent at
// once; those that arrive while one is in flight go together in the next,
// one script call on a server and per tenant on a cluster (plan.go),
// pipelined. A Hit alone is
// one call of the hit script of package internal/scripts, a settle alone
// one of the settle script, and a round of several calls one of the round
// script, which runs each by its own script's code, in order. A Peek is
// one call of the read-only peek script, never in a round (its no-writes
// flag lets it run where a writing round would be refused); Reset is one
// call of the reset script. The adapter only sends commands and says
// which errors were the server's reply; everything else — building the script calls, FCALL of
// the scripts' function library then EVAL once when the server lacks it
// (functions.go), rounds, grouping by tenant, decoding, the eviction
// policy check — is here, once.
//
// The path of a Redis Hit: fleetstore.Store.Hit (checks, budget, error
// classification) → driver.Conn.Hit, which is [Conn.Hit] here →
// scripts.HitCall (keys and arguments) → a round (join, sendQueued) →
// [Client.Eval] alone or [Client.EvalMulti] (FCALL, EVAL when the function
// is missing) → scripts.DecodeHit, or scripts.DecodeRound then DecodeHit.
package rediscore

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/internal/round"
	"github.com/fleetstore/fleetstore/internal/scripts"
)

// Client is what a client library adapter gives the core. Its methods are
// called concurrently and return the client's own errors; an adapter wraps
// driver.ErrTimeout or driver.ErrUnavailable itself only where it alone
// can tell (a pool timeout, a cached connect failure).
type Client interface {
	// Eval runs one script call of s, sent as how says (FCALL, EVALSHA or
	// EVAL), over keys and args, never re-sent by the client (T5). The
	// reply is decoded into int64, string, nil and []any of those.
	Eval(ctx context.Context, s *scripts.Script, how Send, keys, args []string) (any, error)
	// EvalMulti runs every call, each of its own Script, sent as how
	// says, in one pipeline (one round trip per node; one call alone may
	// go as a plain command), setting each call's Reply and Err. The
	// calls are written at once: never queued behind a batch of other
	// calls in flight (a round would wait a round trip more for nothing).
	EvalMulti(ctx context.Context, how Send, calls []*Call)
	// LoadLibrary loads the function library source (FUNCTION LOAD) on
	// every master (one server: it); a library of that name already there
	// is no error, nor is a replica's refusal.
	LoadLibrary(ctx context.Context, source string) error
	// Ping pings one node.
	Ping(ctx context.Context) error
	// ConfigGet reads the config parameters names from every master (one
	// server: it alone): server address → name → value ("" when the
	// server does not have it).
	ConfigGet(ctx context.Context, names ...string) (map[string]map[string]string, error)
	// IsReply reports whether err is the server's own error reply.
	IsReply(err error) bool
	// IsNoScript reports whether err is the server's NOSCRIPT reply: the
	// script did not run.
	IsNoScript(err error) bool
	// ErrorText is the text of the server's error reply err ("ERR Function
	// not found", or without its "ERR "), "" when err is not one.
	ErrorText(err error) string
	// SplitByTenant reports whether a settle batch must be one script call
	// per tenant (a cluster, or a server that may turn out to be one).
	SplitByTenant() bool
	// Close closes every connection and goroutine of the client (T4).
	Close() error
}

// Call is one script call and, once it ran, its reply or the client's
// error.
type Call struct {
	Script     *scripts.Script
	Keys, Args []string
	Reply      any
	Err        error
}

// Conn implements driver.Conn over a Client.
type Conn struct {
	cl      Client
	prefix  string
	timeout time.Duration
	log     *zap.Logger
	display string // the URL, password redacted

	hitsAlone bool // every Hit alone, never in a round (HitsAlone)

	checked  atomic.Bool // maxmemory-policy known (or not knowable)
	checking atomic.Bool // a check is running
	fn       functions   // the scripts' function library on the server

	// bg is cancelled by Close; the eviction check and the library's load
	// run under it and Close waits for them (T4).
	bg     context.Context
	stopBG context.CancelFunc
	wg     sync.WaitGroup

	rounds *round.Queue[*op, result] // by tenant on a cluster, else the one lane "" (group.go)
}

// HitsAlone is what a Client implements when its own pipelining setting
// rules how Hits go: when HitsAlone returns true, every Hit is sent alone
// (Client.Eval), never in a round.
type HitsAlone interface{ HitsAlone() bool }

var (
	_ driver.Conn   = (*Conn)(nil)
	_ driver.Peeker = (*Conn)(nil)
)

// New returns a Conn over cl for cfg; display is the URL with its password
// redacted, for log lines.
func New(cl Client, cfg driver.Config, display string) *Conn {
	c := &Conn{cl: cl, prefix: cfg.KeyPrefix, timeout: cfg.Timeout, log: cfg.Logger, display: display}
	if a, ok := cl.(HitsAlone); ok {
		c.hitsAlone = a.HitsAlone()
	}
	c.bg, c.stopBG = context.WithCancel(context.Background())
	c.rounds = c.newRounds()
	return c
}

// Client returns the adapter, for the drivers' tests.
func (c *Conn) Client() Client { return c.cl }

// Hit implements driver.Conn: one call of the hit script (CONTRACT §3–§4),
// on the one slot of the tenant's hash tag, in a round (group.go) unless
// the client sends Hits alone (HitsAlone).
func (c *Conn) Hit(
	ctx context.Context, charges []driver.Charge, claim *driver.Claim,
) (driver.Result, error) {
	if c.hitsAlone {
		keys, args := scripts.HitCall(c.prefix, charges, claim)
		reply, err := c.run(ctx, scripts.Hit, keys, args)
		if err != nil {
			return driver.Result{}, err
		}
		res, err := scripts.DecodeHit(reply, len(charges), scripts.Windows(charges))
		return res, driver.ErrorReply(err)
	}
	return c.hit(ctx, charges, claim)
}

// Peek implements driver.Peeker: one call of the peek script (CONTRACT
// G11), a no-writes script the server refuses to let write, on the one
// slot of the tenant's hash tag.
func (c *Conn) Peek(ctx context.Context, charges []driver.Charge) (driver.Result, error) {
	keys, args := scripts.PeekCall(c.prefix, charges)
	reply, err := c.run(ctx, scripts.Peek, keys, args)
	if err != nil {
		return driver.Result{}, err
	}
	res, err := scripts.DecodePeek(reply, len(charges), scripts.Windows(charges))
	return res, driver.ErrorReply(err)
}

// Commit implements driver.Conn (C5–C8, C10), in a round of group commit
// (group.go).
func (c *Conn) Commit(ctx context.Context, claims []driver.Claim) ([]error, error) {
	return c.settle(ctx, true, claims)
}

// Release implements driver.Conn (C5–C8, C10), in a round of group
// commit (group.go).
func (c *Conn) Release(ctx context.Context, claims []driver.Claim) ([]error, error) {
	return c.settle(ctx, false, claims)
}

// Reset implements driver.Conn: one call of the reset script, which
// deletes the TATs of the tenant's shard 0 (G5).
func (c *Conn) Reset(ctx context.Context, tenant string) error {
	_, err := c.run(ctx, scripts.Reset, scripts.ResetCall(c.prefix, tenant), nil)
	return err
}

// Ping implements driver.Conn.
func (c *Conn) Ping(ctx context.Context) error {
	if err := c.cl.Ping(ctx); err != nil {
		return c.mark(err)
	}
	c.answered()
	return nil
}

// Close implements driver.Conn: it stops the eviction check, waits for
// it, and closes the client.
func (c *Conn) Close() error {
	c.stopBG()
	c.wg.Wait()
	return c.cl.Close()
}

// run calls s with FCALL (EVALSHA once the server refused functions), and
// with EVAL once when the server's reply proves it did not run (its
// function or script missing, after a restart or a flush: c.again), so
// that running it cannot charge twice. A reply marks the server reached;
// an error reply is returned marked as one (mark).
func (c *Conn) run(ctx context.Context, s *scripts.Script, keys, args []string) (any, error) {
	call := &Call{Script: s, Keys: keys, Args: args}
	c.runOne(ctx, call)
	if call.Err != nil {
		return nil, c.mark(call.Err)
	}
	c.answered()
	return call.Reply, nil
}

// runOne runs call alone (Client.Eval: through the client's pipelining
// of concurrent calls, if any), then once more with EVAL when it did not
// run (c.again), setting its Reply and Err.
func (c *Conn) runOne(ctx context.Context, call *Call) {
	how := c.first()
	call.Reply, call.Err = c.cl.Eval(ctx, call.Script, how, call.Keys, call.Args)
	if c.again(how, call.Err) {
		call.Reply, call.Err = c.cl.Eval(ctx, call.Script, SendSource, call.Keys, call.Args)
	}
}

// runAll runs every call in one pipeline (EvalMulti), then those that
// did not run (c.again) once more with EVAL in a second one.
func (c *Conn) runAll(ctx context.Context, calls []*Call) {
	how := c.first()
	c.cl.EvalMulti(ctx, how, calls)
	var again []*Call
	for _, call := range calls {
		if c.again(how, call.Err) {
			again = append(again, call)
		}
	}
	if len(again) > 0 {
		c.cl.EvalMulti(ctx, SendSource, again)
	}
}

// mark marks err as the server's reply when it was one (the Store then
// knows the server was reached), and starts the eviction check on a reply.
func (c *Conn) mark(err error) error {
	if c.cl.IsReply(err) {
		c.answered()
		return driver.ErrorReply(err)
	}
	return err
}

// GroupByTenant returns the indices of claims grouped by tenant, in order
// of first appearance: one settle script call per group keeps every call's
// keys in one cluster slot (the tenant's hash tag).
func GroupByTenant(claims []driver.Claim) [][]int {
	var groups [][]int
	at := make(map[string]int)
	for i := range claims {
		g, ok := at[claims[i].Tenant]
		if !ok {
			g = len(groups)
			at[claims[i].Tenant] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], i)
	}
	return groups
}
