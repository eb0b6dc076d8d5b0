// Command scriptcost measures the server time of the Redis driver's
// scripts: it runs Hits (or commits) through fleetstore's redis driver
// against a running server and prints INFO commandstats' usec_per_call of
// the script calls (FCALL, or EVALSHA), and of every command the script
// called, per round.
//
//	scriptcost -addr 127.0.0.1:6379 -n 3000 -rounds 5 -mode hit
//
// Modes: hit (a hooks and a bytes charge and a claim on a fresh key, the
// compare rows' Hit), limited (the same on a drained bucket: RateLimited),
// duplicate (a committed key: Duplicate), commit (Commit of a fresh claim,
// one per call), memory (used_memory growth per committed claim over -n
// claims of 1000 tenants "tenant-000000"…, key_prefix "fleetstore", 72h
// TTL: the same names for every layout, so rounds compare). It resets the
// server's stats (CONFIG RESETSTAT) before each round, so run it on a
// server nothing else uses. Build it at two
// commits and run the binaries alternately for a before/after: the server
// and the machine's noise are then the same for both.
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/bench/internal/cmdstat"
	_ "github.com/fleetstore/fleetstore/drivers/redis"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:6379",
		"a running redis-server or valkey-server nothing else uses")
	n := flag.Int("n", 3000, "calls per round")
	rounds := flag.Int("rounds", 5, "rounds")
	mode := flag.String("mode", "hit", "hit, limited, duplicate, commit or memory")
	flag.Parse()
	run := run
	if *mode == "memory" {
		run = func(addr string, n, rounds int, _ string) error { return memory(addr, n, rounds) }
	}
	if err := run(*addr, *n, *rounds, *mode); err != nil {
		fmt.Fprintln(os.Stderr, "scriptcost:", err)
		os.Exit(1)
	}
}

func run(addr string, n, rounds int, mode string) error {
	ctx := context.Background()
	run := strconv.FormatUint(rand.Uint64()>>12, 36)
	prefix := "fscost" + run
	st, err := fleetstore.Open("redis://" + addr + "/0?timeout=2s&key_prefix=" + prefix)
	if err != nil {
		return err
	}
	defer st.Close()
	admin := goredis.NewClient(&goredis.Options{Addr: addr})
	defer admin.Close()
	defer func() {
		iter := admin.Scan(ctx, 0, prefix+":*", 1000).Iterator()
		for iter.Next(ctx) {
			admin.Unlink(ctx, iter.Val())
		}
	}()

	charges := func(t string, inc time.Duration) []fleetstore.Charge {
		return []fleetstore.Charge{
			{Kind: fleetstore.Hooks, Tenant: t, Increment: inc, Capacity: time.Minute},
			{Kind: fleetstore.Bytes, Tenant: t, Increment: inc, Capacity: time.Minute},
		}
	}
	claim := func(i int) *fleetstore.Claim {
		return &fleetstore.Claim{
			Tenant: "tenant-" + run, SourceID: "github",
			Key:    fmt.Sprintf("%08x-0f1e-11ef-8a2b-%012x", i, i*7919),
			HookID: fmt.Sprintf("01J%023d", i), Node: "edge-01",
			TTL: time.Hour, PendingTTL: time.Minute,
		}
	}
	// The call of one op; want is the outcome it must have.
	var op func(i int) error
	check := func(res fleetstore.Result, err error, want fleetstore.Outcome) error {
		if err == nil && res.Outcome != want {
			err = fmt.Errorf("got %v, want %v", res.Outcome, want)
		}
		return err
	}
	tenant := "tenant-" + run
	switch mode {
	case "hit":
		op = func(i int) error {
			res, err := st.Hit(ctx, charges(tenant, time.Microsecond), claim(i))
			return check(res, err, fleetstore.OK)
		}
	case "limited":
		if _, err := st.Hit(ctx, charges(tenant, time.Minute), nil); err != nil {
			return err
		}
		op = func(i int) error {
			res, err := st.Hit(ctx, charges(tenant, time.Minute), claim(i))
			return check(res, err, fleetstore.RateLimited)
		}
	case "duplicate":
		c := claim(-1)
		if err := st.Commit(ctx, *c); err != nil {
			return err
		}
		op = func(i int) error {
			o := *c
			o.HookID = "other"
			res, err := st.Hit(ctx, charges(tenant, time.Microsecond), &o)
			return check(res, err, fleetstore.Duplicate)
		}
	case "commit":
		op = func(i int) error { return st.Commit(ctx, *claim(i)) }
	default:
		return fmt.Errorf("unknown -mode %q", mode)
	}
	// Warm up: the library loaded, the connection open.
	next := 1 << 20
	for range 100 {
		if err := op(next); err != nil {
			return err
		}
		next++
	}
	for r := range rounds {
		if err := admin.ConfigResetStat(ctx).Err(); err != nil {
			return err
		}
		for range n {
			if err := op(next); err != nil {
				return err
			}
			next++
		}
		info, err := admin.Info(ctx, "commandstats").Result()
		if err != nil {
			return err
		}
		fmt.Printf("round %d mode %s: %s\n", r, mode, stats(info))
	}
	return nil
}

// stats lists the script calls' usec_per_call first (FCALL; EVALSHA and
// EVAL when the server ran any), then every other command's but INFO's
// and CONFIG's (the ones this program sends).
func stats(info string) string {
	var first, rest []string
	for _, c := range cmdstat.Parse(info) {
		switch c.Name {
		case "fcall", "evalsha", "eval":
			first = append(first, c.Name+"_usec_per_call="+c.UsecPerCall+" calls="+c.Calls)
		default:
			rest = append(rest, c.Name+" "+c.UsecPerCall+"us×"+c.Calls)
		}
	}
	return strings.Join(first, " ") + " | " + strings.Join(rest, " ")
}

// memory commits n claims in batches of 100 (the compare rows' shape: a
// 36-byte GitHub delivery id, a 26-byte hook id, node "edge-01", 72h) per
// round, and prints the used_memory growth per claim, then deletes them.
func memory(addr string, n, rounds int) error {
	ctx := context.Background()
	st, err := fleetstore.Open("redis://" + addr + "/0?timeout=10s")
	if err != nil {
		return err
	}
	defer st.Close()
	admin := goredis.NewClient(&goredis.Options{Addr: addr})
	defer admin.Close()
	used := func() (int64, error) {
		info, err := admin.Info(ctx, "memory").Result()
		if err != nil {
			return 0, err
		}
		for line := range strings.SplitSeq(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
				return strconv.ParseInt(v, 10, 64)
			}
		}
		return 0, fmt.Errorf("INFO memory has no used_memory")
	}
	for r := range rounds {
		if err := admin.Do(ctx, "FLUSHALL", "SYNC").Err(); err != nil {
			return err
		}
		if err := st.Commit(ctx, fleetstore.Claim{Tenant: "warm", SourceID: "github", Key: "k",
			HookID: "h", TTL: time.Hour, PendingTTL: time.Minute}); err != nil {
			return err
		}
		m0, err := used()
		if err != nil {
			return err
		}
		batch := make([]fleetstore.Claim, 0, 100)
		for i := range n {
			batch = append(batch, fleetstore.Claim{
				Tenant: fmt.Sprintf("tenant-%06d", i%1000), SourceID: "github",
				Key:    fmt.Sprintf("%08x-0f1e-11ef-8a2b-%012x", i+r<<24, i*7919),
				HookID: fmt.Sprintf("01J%023d", i), Node: "edge-01",
				TTL: 72 * time.Hour, PendingTTL: time.Minute,
			})
			if len(batch) == cap(batch) || i == n-1 {
				if err := st.Commit(ctx, batch...); err != nil {
					return err
				}
				batch = batch[:0]
			}
		}
		m1, err := used()
		if err != nil {
			return err
		}
		keys, _ := admin.DBSize(ctx).Result()
		fmt.Printf("round %d mode memory: bytes_per_claim=%.1f claims=%d keys=%d\n", r,
			float64(m1-m0)/float64(n), n, keys)
	}
	return admin.Do(ctx, "FLUSHALL", "SYNC").Err()
}
