package redis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/conformance"
	"github.com/fleetstore/fleetstore/internal/scripts"
	"github.com/fleetstore/fleetstore/internal/testing/testserver"
)

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// withPrefix adds a random key_prefix (and more query) to raw.
func withPrefix(raw, prefix string) string { return withQuery(raw, "key_prefix="+prefix) }

// withQuery adds the query parameters kv ("name=value&…") to raw.
func withQuery(raw, kv string) string {
	sep := "?"
	if strings.Contains(raw, "?") {
		sep = "&"
	}
	return raw + sep + kv
}

// openStore opens raw with a random key_prefix and a wide budget for a
// loaded machine; it is closed at the end of the test.
func openStore(t testing.TB, raw string, opts ...fleetstore.Option) (*fleetstore.Store, string) {
	t.Helper()
	prefix := "fstest-" + randHex(6)
	opts = append([]fleetstore.Option{fleetstore.WithTimeout(5 * time.Second)}, opts...)
	st, err := fleetstore.Open(withPrefix(raw, prefix), opts...)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st, prefix
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

// adminClient is a plain go-redis client on the test's servers, for
// inspecting keys: a single-server client for one address, a cluster
// client for several.
func adminClient(t testing.TB, password string, addrs ...string) goredis.UniversalClient {
	t.Helper()
	var c goredis.UniversalClient
	if len(addrs) == 1 {
		c = goredis.NewClient(&goredis.Options{Addr: addrs[0], Password: password})
	} else {
		c = goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: addrs, Password: password})
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// keysUnder lists every record under pattern with its time to live, on
// every master of a cluster or on the one server: each key with its PTTL,
// but a claim shard as its live records, each with its own expiry
// (scripts.ShardRecords).
func keysUnder(ctx context.Context, c goredis.UniversalClient, pattern string) ([]conformance.Record, error) {
	var mu sync.Mutex // ForEachMaster scans the masters concurrently
	var out []conformance.Record
	read := func(ctx context.Context, node goredis.UniversalClient, k string) error {
		if scripts.IsShardKey(k) {
			now, err := node.Time(ctx).Result()
			if err != nil {
				return err
			}
			kv, err := node.HGetAll(ctx, k).Result()
			if err != nil {
				return err
			}
			flat := make([]string, 0, 2*len(kv))
			for f, v := range kv {
				flat = append(flat, f, v)
			}
			mu.Lock()
			out = append(out, scripts.ShardRecords(k, flat, now.UnixMicro())...)
			mu.Unlock()
			return nil
		}
		ttl, err := node.PTTL(ctx, k).Result()
		if err != nil {
			return err
		}
		if ttl == -2 { // expired between SCAN and PTTL
			return nil
		}
		if ttl < 0 {
			ttl = -1
		}
		mu.Lock()
		out = append(out, conformance.Record{Key: k, TTL: ttl})
		mu.Unlock()
		return nil
	}
	scan := func(ctx context.Context, node goredis.UniversalClient) error {
		iter := node.Scan(ctx, 0, pattern, 1000).Iterator()
		for iter.Next(ctx) {
			if err := read(ctx, node, iter.Val()); err != nil {
				return err
			}
		}
		return iter.Err()
	}
	cc, ok := c.(*goredis.ClusterClient)
	if !ok {
		return out, scan(ctx, c)
	}
	// A tenant's pattern (scripts.TenantPattern) is its hash tag and "*":
	// every key it matches is in the tag's slot, listed by its master
	// alone. A SCAN of every master reads the whole keyspace, seconds on
	// a loaded machine.
	tag, ok := strings.CutSuffix(pattern, "*")
	if ok && strings.HasSuffix(tag, "}") && strings.Count(tag, "{") == 1 && !strings.ContainsAny(tag, "*?[") {
		node, err := cc.MasterForKey(ctx, tag)
		if err != nil {
			return nil, err
		}
		slot, err := node.ClusterKeySlot(ctx, tag).Result()
		if err != nil {
			return nil, err
		}
		keys, err := node.ClusterGetKeysInSlot(ctx, int(slot), 1<<20).Result()
		if err != nil {
			return nil, err
		}
		for _, k := range keys {
			if !strings.HasPrefix(k, tag) {
				continue
			}
			if err := read(ctx, node, k); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	err := cc.ForEachMaster(ctx, func(ctx context.Context, node *goredis.Client) error { return scan(ctx, node) })
	return out, err
}

// records is conformance.Config.Records for the servers behind c.
func records(c goredis.UniversalClient) func(ctx context.Context, keyPrefix, tenant string) ([]conformance.Record, error) {
	return func(ctx context.Context, keyPrefix, tenant string) ([]conformance.Record, error) {
		return keysUnder(ctx, c, scripts.TenantPattern(keyPrefix, tenant))
	}
}

// cmdStat returns the calls of cmd in INFO commandstats text.
func cmdStat(info, cmd string) int {
	for _, line := range strings.Split(info, "\n") {
		v, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+cmd+":calls=")
		if !ok {
			continue
		}
		n := 0
		for _, c := range v {
			if c < '0' || c > '9' {
				break
			}
			n = n*10 + int(c-'0')
		}
		return n
	}
	return 0
}

// conforming makes n Hits of charges on st and returns how many were OK.
func conforming(t testing.TB, st *fleetstore.Store, charges []fleetstore.Charge, n int) int {
	t.Helper()
	ok := 0
	for range n {
		res, err := st.Hit(ctx(t), charges, nil)
		if err != nil {
			t.Fatalf("hit: %v", err)
		}
		if res.Outcome == fleetstore.OK {
			ok++
		}
	}
	return ok
}

func wantErrIs(t testing.TB, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got error %v, want %v", what, err, target)
	}
}

// waitLibrary waits until each of nodes holds the scripts' function
// library, which the driver loads in the background once a call finds it
// missing (that call runs with EVAL).
func waitLibrary(t testing.TB, nodes ...*testserver.Redis) {
	t.Helper()
	if err := testserver.WaitLibrary(scripts.Library.Name, 10*time.Second, nodes...); err != nil {
		t.Fatal(err)
	}
}
