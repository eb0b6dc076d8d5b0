package valkey

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/valkey-io/valkey-go"

	"github.com/fleetstore/fleetstore/internal/rediscore"
	"github.com/fleetstore/fleetstore/internal/scripts"
)

// client is the valkey-go adapter of the Redis-family core: it sends the
// commands on the lazily built client and says which errors were the
// server's reply.
type client struct {
	lazy *lazyClient
}

var _ rediscore.Client = (*client)(nil)

// Eval implements rediscore.Client.
func (c *client) Eval(
	ctx context.Context, s *scripts.Script, how rediscore.Send, keys, args []string,
) (any, error) {
	cl, err := c.lazy.get(ctx)
	if err != nil {
		return nil, err
	}
	if cl.Mode() == valkey.ClientModeCluster && !oneTag(keys) {
		return nil, errCrossSlot
	}
	return replyOf(cl.Do(ctx, evalCmd(cl, s, how, keys, args)))
}

// EvalMulti implements rediscore.Client: one DoMulti, pipelined, one round
// trip per node (one call alone: Do).
func (c *client) EvalMulti(ctx context.Context, how rediscore.Send, calls []*rediscore.Call) {
	cl, err := c.lazy.get(ctx)
	if err != nil {
		for _, call := range calls {
			call.Err = err
		}
		return
	}
	var sent []*rediscore.Call
	var cmds valkey.Commands
	cluster := cl.Mode() == valkey.ClientModeCluster
	for _, call := range calls {
		if cluster && !oneTag(call.Keys) {
			call.Err = errCrossSlot
			continue
		}
		sent = append(sent, call)
		cmds = append(cmds, evalCmd(cl, call.Script, how, call.Keys, call.Args))
	}
	switch len(cmds) {
	case 0:
		return
	case 1:
		sent[0].Reply, sent[0].Err = replyOf(cl.Do(ctx, cmds[0]))
		return
	}
	for i, resp := range cl.DoMulti(ctx, cmds...) {
		sent[i].Reply, sent[i].Err = replyOf(resp)
	}
}

// Ping implements rediscore.Client: PING on one node.
func (c *client) Ping(ctx context.Context) error {
	cl, err := c.lazy.get(ctx)
	if err != nil {
		return err
	}
	return cl.Do(ctx, cl.B().Ping().Build()).Error()
}

// ConfigGet implements rediscore.Client: CONFIG GET on every node
// valkey-go knows (a cluster's replicas too).
func (c *client) ConfigGet(
	ctx context.Context, names ...string,
) (map[string]map[string]string, error) {
	cl, err := c.lazy.get(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]map[string]string)
	for addr, node := range cl.Nodes() {
		cfg := make(map[string]string, len(names))
		for _, name := range names {
			got, err := node.Do(ctx, node.B().ConfigGet().Parameter(name).Build()).AsStrMap()
			if err != nil {
				return out, err
			}
			cfg[name] = got[name]
		}
		out[addr] = cfg
	}
	return out, nil
}

// IsReply implements rediscore.Client.
func (*client) IsReply(err error) bool {
	_, ok := valkey.IsValkeyErr(err)
	return ok
}

// IsNoScript implements rediscore.Client.
func (*client) IsNoScript(err error) bool {
	e, ok := valkey.IsValkeyErr(err)
	return ok && e.IsNoScript()
}

// ErrorText implements rediscore.Client.
func (*client) ErrorText(err error) string {
	if e, ok := valkey.IsValkeyErr(err); ok {
		return e.Error()
	}
	return ""
}

// LoadLibrary implements rediscore.Client: FUNCTION LOAD on every node
// valkey-go knows; a replica's refusal (READONLY) is no error.
func (c *client) LoadLibrary(ctx context.Context, source string) error {
	cl, err := c.lazy.get(ctx)
	if err != nil {
		return err
	}
	for _, node := range cl.Nodes() {
		err := node.Do(ctx, node.B().FunctionLoad().FunctionCode(source).Build()).Error()
		// valkey-go gives an ERR reply's text without its "ERR ".
		if e, ok := valkey.IsValkeyErr(err); ok {
			text := strings.TrimPrefix(e.Error(), "ERR ")
			if strings.HasPrefix(text, "READONLY") ||
				strings.HasPrefix(text, "Library '") && strings.HasSuffix(text, "' already exists") {
				continue
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// SplitByTenant implements rediscore.Client: on a cluster (valkey-go's
// cluster client, which it also builds for one address that is a cluster
// node), and while the client is not built, when that is not known yet;
// a single server or a Sentinel-managed master takes every tenant's
// claims in one call.
func (c *client) SplitByTenant() bool {
	b := c.lazy.built.Load()
	return b == nil || b.c.Mode() == valkey.ClientModeCluster
}

// Close implements rediscore.Client: it stops a build in flight and closes
// every connection and goroutine of the client (T4).
func (c *client) Close() error {
	c.lazy.close()
	return nil
}

// errCrossSlot refuses a call to a cluster whose keys do not share one
// hash tag. The key layout makes it impossible (every key of such a call
// is one tenant's); checking before the command is built keeps it
// impossible should the layout change, since valkey-go's cluster builder
// panics on such a call.
var errCrossSlot = errors.New("keys of one script call do not share one hash tag")

// evalCmd builds FCALL, EVALSHA or EVAL of s (as how says) over keys and
// args. The command is not marked retryable or read-only: valkey-go never
// re-sends it (T5).
func evalCmd(
	cl valkey.Client, s *scripts.Script, how rediscore.Send, keys, args []string,
) valkey.Completed {
	name, body := "EVAL", s.Source
	switch how {
	case rediscore.SendFunction:
		name, body = "FCALL", s.Function
	case rediscore.SendSHA:
		name, body = "EVALSHA", s.SHA1
	}
	return cl.B().Arbitrary(name, body, strconv.Itoa(len(keys))).Keys(keys...).Args(args...).Build()
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
