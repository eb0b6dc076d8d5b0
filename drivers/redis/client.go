package redis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	goredis "github.com/redis/go-redis/v9"

	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/internal/rediscore"
	"github.com/fleetstore/fleetstore/internal/scripts"
)

// client is the go-redis adapter of the Redis-family core: it sends the
// commands and says which errors were the server's reply.
type client struct {
	c       goredis.UniversalClient
	cluster bool
	// ap, when not nil, is go-redis's auto-pipeliner (its deferred face)
	// over c: Eval sends through it while another Eval is in flight (or
	// always, with pipeline=always), so that concurrent Hits share a
	// round trip (see the package doc, Pipelining); inFlight counts the
	// Evals under way.
	ap       *goredis.AutoPipeliner
	always   bool
	inFlight atomic.Int32
}

var (
	_ rediscore.Client    = (*client)(nil)
	_ rediscore.HitsAlone = (*client)(nil)
)

// HitsAlone implements rediscore.HitsAlone: with pipeline=off every Hit
// goes alone on a pooled connection, with pipeline=always through the
// auto-pipeliner; with pipeline=auto Hits go in the core's rounds.
func (c *client) HitsAlone() bool { return c.ap == nil || c.always }

// noRetry is a script command that go-redis must never re-send: its reply
// may have been lost after the script ran (CONTRACT T5). The node clients
// already have retries off (MaxRetries -1); this also stops the cluster
// client's own retry loop, which still follows MOVED and ASK (a redirected
// command did not run).
//
// It also carries the caller's context: leftBehind drops from a batch the
// commands whose caller has already returned (T1), before they are written.
// The command is held by value, so a script call is one allocation for the
// command and its NoRetry mark, not two.
type noRetry struct {
	goredis.Cmd
	ctx context.Context
}

// NoRetry implements goredis.Cmder.
func (*noRetry) NoRetry() bool { return true }

// leftBehind is a go-redis hook: a script command whose caller's context
// is done by the time its batch is written is not written (it gets the
// context's error, which no one reads). go-redis's auto-pipeliner runs a
// batch on a context of its own, not the callers', so without it a Hit
// queued behind a slow batch would still run after its caller got
// ErrTimeout. The pipeliner sends a batch of one command as a process
// call, others as a pipeline: both are hooked.
type leftBehind struct{}

// left reports the context error of cmd's caller when it has returned.
func left(cmd goredis.Cmder) error {
	if nr, ok := cmd.(*noRetry); ok && nr.ctx != nil {
		if err := nr.ctx.Err(); err != nil {
			return leftErr{err}
		}
	}
	return nil
}

// leftErr is the error of a command leftBehind did not send: its caller's
// context error, marked as a per-command outcome (goredis.Error), as a
// Redis error reply is. go-redis's auto-pipeliner writes a large batch in
// chunks (MaxBatchBytes, 128 KiB) and fails every later chunk unsent when a
// command of a chunk ends in an error that is not a Redis reply: a caller
// that left must not fail its batchmates, whose own deadlines still run.
type leftErr struct{ error }

// RedisError implements goredis.Error.
func (leftErr) RedisError() {}

func (e leftErr) Unwrap() error { return e.error }

func (leftBehind) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (leftBehind) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		if err := left(cmd); err != nil {
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}

func (leftBehind) ProcessPipelineHook(
	next goredis.ProcessPipelineHook,
) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		var live []goredis.Cmder // nil: every command is live (no copy)
		for i, cmd := range cmds {
			err := left(cmd)
			if err == nil {
				if live != nil {
					live = append(live, cmd)
				}
				continue
			}
			cmd.SetErr(err)
			if live == nil {
				live = append(make([]goredis.Cmder, 0, len(cmds)), cmds[:i]...)
			}
		}
		switch {
		case live == nil:
			return next(ctx, cmds)
		case len(live) == 0:
			return nil
		}
		return next(ctx, live)
	}
}

// evalCmd builds FCALL, EVALSHA or EVAL of s (as how says) over keys and
// args, marked NoRetry, carrying caller (nil: none) for leftBehind.
//
// go-redis takes a command's arguments as []any and writes a *string as
// the string it points to: every key and argument goes as a pointer into
// keys and args (and the script's function, SHA1 or source), so none is
// boxed into an allocation of its own; the caller never changes keys or
// args after.
// The first key's position is set here, so a cluster client finds the
// slot without formatting the key count back into a string.
func evalCmd(
	ctx, caller context.Context, s *scripts.Script, how rediscore.Send, keys, args []string,
) *noRetry {
	a := make([]any, 3+len(keys)+len(args))
	switch how {
	case rediscore.SendFunction:
		a[0], a[1] = "fcall", &s.Function
	case rediscore.SendSHA:
		a[0], a[1] = "evalsha", &s.SHA1
	default:
		a[0], a[1] = "eval", &s.Source
	}
	a[2] = len(keys)
	for i := range keys {
		a[3+i] = &keys[i]
	}
	for i := range args {
		a[3+len(keys)+i] = &args[i]
	}
	cmd := &noRetry{Cmd: *goredis.NewCmd(ctx, a...), ctx: caller}
	if len(keys) > 0 {
		cmd.SetFirstKeyPos(3)
	}
	return cmd
}

// Eval implements rediscore.Client. A call alone (no other Eval in
// flight) goes straight to a pooled connection, unless pipeline=always:
// the auto-pipeliner's hand-offs between goroutines would only add to its
// latency. Through the auto-pipeliner, the call waits for its batch or
// for ctx, whichever comes first (T1): go-redis's batch runs on its own
// context, bounded by the read and write timeouts (at most the budget),
// and a command whose caller left before its batch was written is not
// sent (leftBehind).
func (c *client) Eval(
	ctx context.Context, s *scripts.Script, how rediscore.Send, keys, args []string,
) (any, error) {
	alone := true
	if c.ap != nil {
		alone = c.inFlight.Add(1) == 1 && !c.always
		defer c.inFlight.Add(-1)
	}
	if alone {
		cmd := evalCmd(ctx, nil, s, how, keys, args)
		if err := c.c.Process(ctx, cmd); err != nil {
			return nil, c.failed(err)
		}
		return cmd.Val(), nil
	}
	cmd := evalCmd(ctx, ctx, s, how, keys, args)
	if err := c.ap.Submit(ctx, cmd).WaitContext(ctx); err != nil {
		// ctx's error when it ran out first: the batch may still run, so
		// cmd is never read then. A timeout may mean a dead node, as on
		// the plain path (failed reloads a cluster's slot map).
		return nil, c.failed(err)
	}
	return cmd.Val(), nil
}

// EvalMulti implements rediscore.Client: one pipeline, which go-redis
// sends as one round trip per node; one call alone goes straight to a
// pooled connection. Never through the auto-pipeliner: a round queued
// behind its batch in flight would wait a round trip more, and the calls
// queued behind the round with it.
func (c *client) EvalMulti(ctx context.Context, how rediscore.Send, calls []*rediscore.Call) {
	if len(calls) == 1 {
		call := calls[0]
		cmd := evalCmd(ctx, nil, call.Script, how, call.Keys, call.Args)
		_ = c.c.Process(ctx, cmd)
		call.Reply, call.Err = cmd.Val(), c.failed(cmd.Err())
		return
	}
	cmds := make([]*noRetry, len(calls))
	pipe := c.c.Pipeline()
	for i, call := range calls {
		cmds[i] = evalCmd(ctx, nil, call.Script, how, call.Keys, call.Args)
		_ = pipe.Process(ctx, cmds[i])
	}
	_, _ = pipe.Exec(ctx) // each command carries its own error
	for i, call := range calls {
		call.Reply, call.Err = cmds[i].Val(), c.failed(cmds[i].Err())
	}
}

// Ping implements rediscore.Client.
func (c *client) Ping(ctx context.Context) error {
	return c.failed(c.c.Ping(ctx).Err())
}

// ConfigGet implements rediscore.Client: CONFIG GET on the server, or on
// every master of a cluster.
func (c *client) ConfigGet(
	ctx context.Context, names ...string,
) (map[string]map[string]string, error) {
	var mu sync.Mutex // ForEachMaster calls get concurrently
	out := make(map[string]map[string]string)
	get := func(ctx context.Context, node *goredis.Client) error {
		cfg := make(map[string]string, len(names))
		for _, name := range names {
			got, err := node.ConfigGet(ctx, name).Result()
			if err != nil {
				return err
			}
			cfg[name] = got[name]
		}
		mu.Lock()
		out[node.Options().Addr] = cfg
		mu.Unlock()
		return nil
	}
	if cc, ok := c.c.(*goredis.ClusterClient); ok {
		return out, cc.ForEachMaster(ctx, get)
	}
	return out, get(ctx, c.c.(*goredis.Client))
}

// IsReply implements rediscore.Client: go-redis marks the server's error
// replies (and its nil reply) with goredis.Error.
func (*client) IsReply(err error) bool {
	var reply goredis.Error
	return err != nil && errors.As(err, &reply)
}

// IsNoScript implements rediscore.Client.
func (*client) IsNoScript(err error) bool {
	return err != nil && goredis.HasErrorPrefix(err, "NOSCRIPT")
}

// ErrorText implements rediscore.Client.
func (*client) ErrorText(err error) string {
	var reply goredis.Error
	if err == nil || !errors.As(err, &reply) {
		return ""
	}
	return reply.Error()
}

// LoadLibrary implements rediscore.Client: FUNCTION LOAD on the server, or
// on every master of a cluster.
func (c *client) LoadLibrary(ctx context.Context, source string) error {
	load := func(ctx context.Context, node *goredis.Client) error {
		err := node.FunctionLoad(ctx, source).Err()
		if err != nil && goredis.HasErrorPrefix(err, "Library '") &&
			strings.Contains(err.Error(), "' already exists") {
			return nil
		}
		return err
	}
	if cc, ok := c.c.(*goredis.ClusterClient); ok {
		return c.failed(cc.ForEachMaster(ctx, load))
	}
	return c.failed(load(ctx, c.c.(*goredis.Client)))
}

// SplitByTenant implements rediscore.Client: only a cluster needs one
// settle call per slot.
func (c *client) SplitByTenant() bool { return c.cluster }

// Close implements rediscore.Client.
func (c *client) Close() error { return c.c.Close() }

// failed is what the driver alone knows of a call's error:
//
//   - on a cluster, an error that means the slot map may be stale (the
//     node is gone, or no longer a master: refused, reset, timed out,
//     CLUSTERDOWN, READONLY, TRYAGAIN) asks go-redis to reload the map in
//     the background, so that calls reach a promoted replica as soon as
//     the cluster has one, not at go-redis's own periodic reload (60s);
//     go-redis reloads at most once per 200ms, and no call waits for it;
//   - on a single server, a MOVED or ASK reply means the server is a
//     cluster node: say so, as every call would fail alike;
//   - a pool wait that ran out is a timeout (poolTimeout).
func (c *client) failed(err error) error {
	if err == nil {
		return nil
	}
	if cc, ok := c.c.(*goredis.ClusterClient); ok {
		if staleMap(err) {
			cc.ReloadState(context.Background())
		}
	} else if goredis.HasErrorPrefix(err, "MOVED") || goredis.HasErrorPrefix(err, "ASK") {
		return fmt.Errorf("%w (the server is a Redis Cluster node: open it as "+
			"redis+cluster://HOST:PORT, or with addr= for each node)", err)
	}
	return poolTimeout(err)
}

// staleMap reports an error after which a cluster's slot map may be out of
// date: the node did not answer, or answered that it does not serve the
// slot as a master.
func staleMap(err error) bool {
	var reply goredis.Error
	if errors.As(err, &reply) {
		for _, p := range []string{"CLUSTERDOWN", "READONLY", "TRYAGAIN", "MASTERDOWN"} {
			if goredis.HasErrorPrefix(err, p) {
				return true
			}
		}
		return false
	}
	return !errors.Is(err, context.Canceled) // refused, reset, EOF, timeout
}

// poolTimeout marks go-redis's pool wait running out as a timeout: go-redis
// waits for a pool connection on a timer of its own (pool_timeout, at most
// the budget) beside ctx.Done(), and may wake on that timer while the
// call's context is still live, so only the driver can tell (T1).
func poolTimeout(err error) error {
	if errors.Is(err, goredis.ErrPoolTimeout) {
		return fmt.Errorf("%w: %w", driver.ErrTimeout, err)
	}
	return err
}
