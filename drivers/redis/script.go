package redis

import (
	"context"

	goredis "github.com/redis/go-redis/v9"

	"github.com/fleetstore/fleetstore/internal/scripts"
)

// noRetry is a script command that go-redis must never re-send: its reply
// may have been lost after the script ran (CONTRACT T5). The node clients
// already have retries off (MaxRetries -1); this also stops the cluster
// client's own retry loop, which still follows MOVED and ASK (a redirected
// command did not run).
type noRetry struct{ *goredis.Cmd }

// NoRetry implements goredis.Cmder.
func (noRetry) NoRetry() bool { return true }

// evalCmd builds EVALSHA (or EVAL) of s over keys and args.
func evalCmd(ctx context.Context, s *scripts.Script, eval bool, keys, args []string) *goredis.Cmd {
	a := make([]any, 0, 3+len(keys)+len(args))
	if eval {
		a = append(a, "eval", s.Source)
	} else {
		a = append(a, "evalsha", s.SHA1)
	}
	a = append(a, len(keys))
	for _, k := range keys {
		a = append(a, k)
	}
	for _, v := range args {
		a = append(a, v)
	}
	return goredis.NewCmd(ctx, a...)
}

// run calls s with EVALSHA, and with EVAL once when the server does not
// know the script (NOSCRIPT: it did not run). EVAL also caches it.
func (c *conn) run(ctx context.Context, s *scripts.Script, keys, args []string) (any, error) {
	cmd := evalCmd(ctx, s, false, keys, args)
	err := c.client.Process(ctx, noRetry{cmd})
	if isNoScript(err) {
		cmd = evalCmd(ctx, s, true, keys, args)
		err = c.client.Process(ctx, noRetry{cmd})
	}
	if err != nil {
		return nil, err
	}
	return cmd.Val(), nil
}

// runAll runs every call of s: one alone is a plain call; several go in
// one pipeline (on a cluster, one round trip per node), then those the
// server answered NOSCRIPT go once more with EVAL in a second pipeline.
func (c *conn) runAll(ctx context.Context, s *scripts.Script, calls []scripts.Call) {
	if len(calls) == 1 {
		calls[0].Reply, calls[0].Err = c.run(ctx, s, calls[0].Keys, calls[0].Args)
		return
	}
	pending := make([]int, len(calls))
	for i := range calls {
		pending[i] = i
	}
	for _, eval := range []bool{false, true} {
		cmds := make([]*goredis.Cmd, len(pending))
		pipe := c.client.Pipeline()
		for j, i := range pending {
			cmds[j] = evalCmd(ctx, s, eval, calls[i].Keys, calls[i].Args)
			_ = pipe.Process(ctx, noRetry{cmds[j]})
		}
		_, _ = pipe.Exec(ctx) // each command carries its own error
		var again []int
		for j, i := range pending {
			err := cmds[j].Err()
			if !eval && isNoScript(err) {
				again = append(again, i)
				continue
			}
			calls[i].Reply, calls[i].Err = cmds[j].Val(), err
		}
		if len(again) == 0 {
			return
		}
		pending = again
	}
}

func isNoScript(err error) bool {
	return err != nil && goredis.HasErrorPrefix(err, "NOSCRIPT")
}
