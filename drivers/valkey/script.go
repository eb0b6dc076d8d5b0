package valkey

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/valkey-io/valkey-go"

	"github.com/fleetstore/fleetstore/internal/scripts"
)

// errCrossSlot refuses a call whose keys do not share one hash tag. The
// key layout makes it impossible (every key of a call is one tenant's);
// checking before the command is built keeps it impossible should the
// layout change, since valkey-go's cluster builder panics on such a call.
var errCrossSlot = errors.New("keys of one script call do not share one hash tag")

// evalCmd builds EVALSHA (or EVAL) of s over keys and args. The command is
// not marked retryable or read-only: valkey-go never re-sends it (T5).
func evalCmd(cl valkey.Client, s *scripts.Script, eval bool, keys, args []string) valkey.Completed {
	name, body := "EVALSHA", s.SHA1
	if eval {
		name, body = "EVAL", s.Source
	}
	return cl.B().Arbitrary(name, body, strconv.Itoa(len(keys))).Keys(keys...).Args(args...).Build()
}

// run calls s with EVALSHA, and once more with EVAL when the server does
// not know the script (NOSCRIPT: it did not run, so re-running cannot
// charge twice). EVAL also caches it for the next EVALSHA.
func run(ctx context.Context, cl valkey.Client, s *scripts.Script, keys, args []string) (any, error) {
	if !oneTag(keys) {
		return nil, errCrossSlot
	}
	resp := cl.Do(ctx, evalCmd(cl, s, false, keys, args))
	if isNoScript(resp.Error()) {
		resp = cl.Do(ctx, evalCmd(cl, s, true, keys, args))
	}
	return replyOf(resp)
}

// runAll runs every call of s: one alone is a plain call; several go in
// one DoMulti (pipelined: one round trip per node), then those answered
// NOSCRIPT go once more with EVAL in a second one.
func runAll(ctx context.Context, cl valkey.Client, s *scripts.Script, calls []scripts.Call) {
	if len(calls) == 1 {
		calls[0].Reply, calls[0].Err = run(ctx, cl, s, calls[0].Keys, calls[0].Args)
		return
	}
	var pending []int
	for i := range calls {
		if !oneTag(calls[i].Keys) {
			calls[i].Err = errCrossSlot
			continue
		}
		pending = append(pending, i)
	}
	for _, eval := range []bool{false, true} {
		if len(pending) == 0 {
			return
		}
		cmds := make(valkey.Commands, len(pending))
		for j, i := range pending {
			cmds[j] = evalCmd(cl, s, eval, calls[i].Keys, calls[i].Args)
		}
		resps := cl.DoMulti(ctx, cmds...)
		var again []int
		for j, i := range pending {
			if !eval && isNoScript(resps[j].Error()) {
				again = append(again, i)
				continue
			}
			calls[i].Reply, calls[i].Err = replyOf(resps[j])
		}
		pending = again
	}
}

func isNoScript(err error) bool {
	e, ok := valkey.IsValkeyErr(err)
	return ok && e.IsNoScript()
}

// oneTag reports whether keys share one non-empty cluster hash tag, so one
// slot (the tag rule of Redis Cluster: the bytes between the first '{'
// and the next '}').
func oneTag(keys []string) bool {
	if len(keys) == 0 {
		return false
	}
	first := hashTag(keys[0])
	if first == "" {
		return false
	}
	for _, k := range keys[1:] {
		if hashTag(k) != first {
			return false
		}
	}
	return true
}

func hashTag(key string) string {
	i := strings.IndexByte(key, '{')
	if i < 0 {
		return ""
	}
	j := strings.IndexByte(key[i+1:], '}')
	if j <= 0 {
		return ""
	}
	return key[i+1 : i+1+j]
}

// replyOf turns a script's reply into Go values: int64, string, nil and
// []any of those. Any other shape becomes an unexpected value, which the
// decoders refuse as malformed (V4); nothing here can panic.
func replyOf(resp valkey.ValkeyResult) (any, error) {
	if err := resp.Error(); err != nil {
		if valkey.IsValkeyNil(err) {
			return nil, nil // a nil reply: the decoders call it malformed
		}
		return nil, err
	}
	msg, err := resp.ToMessage()
	if err != nil {
		return nil, err
	}
	return goValue(&msg, 0), nil
}

// unexpected stands for a reply element of a type no script returns.
type unexpected string

// maxDepth bounds the nesting goValue follows (the scripts reply with one
// level).
const maxDepth = 4

func goValue(m *valkey.ValkeyMessage, depth int) any {
	switch {
	case m.IsNil():
		return nil
	case m.Error() != nil:
		return unexpected("error")
	case m.IsInt64():
		v, err := m.AsInt64()
		if err != nil {
			return unexpected("integer")
		}
		return v
	case m.IsString():
		v, err := m.ToString()
		if err != nil {
			return unexpected("string")
		}
		return v
	case m.IsArray():
		if depth >= maxDepth {
			return unexpected("nested array")
		}
		a, err := m.ToArray()
		if err != nil {
			return unexpected("array")
		}
		out := make([]any, len(a))
		for i := range a {
			out[i] = goValue(&a[i], depth+1)
		}
		return out
	}
	return unexpected("other")
}
