// Command scriptab compares the server time of two versions of the hit
// script on one server: it loads both, then runs rounds of Hits, and with
// -commit the Commit of each Hit's claim, that alternate between them call
// by call (each on keys of its own: fresh
// tenants every round, fresh claims every call, so that neither finds
// the other's or an earlier run's records), and prints each one's median
// and mean time per call, as the server's SLOWLOG times it (the
// command's own execution, what INFO commandstats sums), per round and
// over all rounds.
//
//	scriptab -addr 127.0.0.1:6379 -a old.lua -b fcall:new.lua -n 1000 -rounds 10
//
// A version is a file, sent as a script (EVALSHA) or as a function
// library (FCALL):
//
//	FILE or eval:FILE  the full script as loaded: claim.lua, a newline,
//	                   hit.lua
//	fcall:FILE         a function library (FUNCTION LOAD REPLACE), whose
//	                   function named …_hit is called (…_settle to commit)
//	round:FILE         a function library whose …_round function is
//	                   called with -k Hits a call (then -k Commits a call),
//	                   as a round of group commit sends them
//
// Each side's time is printed per Hit and per Commit: a call's time
// divided by the Hits or claims in it.
//
// A version's keys follow its layout, -layout-a and -layout-b: s0 (this
// checkout's: the TATs are fields "hooks:" and "bytes:" of the tenant's
// shard 0, PREFIX:{T}:s0, its first key) or b (a bucket hash PREFIX:{T}:b
// of fields "hooks" and "bytes", its first key), so that a version of
// either layout can be measured against this one.
//
// With -quota-b, version B's Hits charge a monthly quota beside the two
// buckets (a window charge, CONTRACT §3.2): run this checkout's library
// on both sides to measure what a quota adds to a Hit.
//
// scriptab -dump-library prints this checkout's library (the drivers'
// FUNCTION LOAD source). It sets slowlog-log-slower-than to 5 (µs: the
// script calls, not most commands they call) and resets the SLOWLOG:
// run it on a server nothing else uses.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/fleetstore/fleetstore/internal/scripts"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:6379", "server")
	a := flag.String("a", "", "version A: FILE, eval:FILE or fcall:FILE")
	b := flag.String("b", "", "version B: FILE, eval:FILE or fcall:FILE")
	n := flag.Int("n", 1000, "Hits per round per version")
	rounds := flag.Int("rounds", 10, "rounds")
	tenants := flag.Int("tenants", 150,
		"tenants per round and version: n/tenants Hits each "+
			"(6.7 by default, as a make compare row at c=1)")
	dump := flag.Bool("dump-library", false, "print this checkout's function library and exit")
	commit := flag.Bool("commit", false, "commit each Hit's claim, in a call of its own (round: of -k claims)")
	k := flag.Int("k", 8, "round: Hits (and Commits) per call")
	layoutA := flag.String("layout-a", "s0", "version A's layout: s0 or b")
	layoutB := flag.String("layout-b", "s0", "version B's layout: s0 or b")
	quotaB := flag.Bool("quota-b", false, "version B's Hits charge a monthly quota too (a window charge, layout s0)")
	flag.Parse()
	if *dump {
		fmt.Print(scripts.Library.Source)
		return
	}
	var layouts [2]layout
	for i, l := range []string{*layoutA, *layoutB} {
		switch l {
		case "s0":
			layouts[i] = layout{key: ":s0", hooks: "hooks:", bytes: "bytes:"}
		case "b":
			layouts[i] = layout{key: ":b", hooks: "hooks", bytes: "bytes"}
		default:
			fmt.Fprintf(os.Stderr, "scriptab: layout %q: want s0 or b\n", l)
			os.Exit(2)
		}
	}
	layouts[1].quota = *quotaB
	if err := run(*addr, [2]string{*a, *b}, layouts, *n, *rounds, *tenants, *commit, *k); err != nil {
		fmt.Fprintln(os.Stderr, "scriptab:", err)
		os.Exit(1)
	}
}

// layout is where a version keeps the TATs: its first key's suffix after
// the tenant's tag and the two kinds' fields; quota: its Hits charge a
// monthly quota too.
type layout struct {
	key, hooks, bytes string
	quota             bool
}

// version is one side of the comparison: how it is called and the name
// the SLOWLOG shows as the command's second argument.
type version struct {
	fcall  bool
	round  bool   // Hits (and Commits) go k to a call of the round function
	name   string // SHA1 or function
	settle string // the settle script's SHA1 or function; "" with -commit: none
}

var (
	hitFunction    = regexp.MustCompile(`function_name = '([A-Za-z0-9_]*_hit)'`)
	settleFunction = regexp.MustCompile(`function_name = '([A-Za-z0-9_]*_settle)'`)
	roundFunction  = regexp.MustCompile(`function_name = '([A-Za-z0-9_]*_round)'`)
)

func load(ctx context.Context, c *goredis.Client, spec string) (version, error) {
	kind, file, ok := strings.Cut(spec, ":")
	if !ok {
		kind, file = "eval", spec
	}
	src, err := os.ReadFile(file)
	if err != nil {
		return version{}, err
	}
	switch kind {
	case "eval":
		sha, err := c.ScriptLoad(ctx, string(src)).Result()
		return version{name: sha}, err
	case "fcall", "round":
		fn := hitFunction
		if kind == "round" {
			fn = roundFunction
		}
		m := fn.FindSubmatch(src)
		if m == nil {
			return version{}, fmt.Errorf("%s registers no function %s", file, fn)
		}
		if err := c.FunctionLoadReplace(ctx, string(src)).Err(); err != nil {
			return version{}, err
		}
		v := version{fcall: true, round: kind == "round", name: string(m[1])}
		if m := settleFunction.FindSubmatch(src); m != nil {
			v.settle = string(m[1])
		}
		return v, nil
	}
	return version{}, fmt.Errorf("%q: want FILE, eval:FILE or fcall:FILE", spec)
}

func run(addr string, specs [2]string, layouts [2]layout, n, rounds, tenants int, commit bool, k int) error {
	ctx := context.Background()
	c := goredis.NewClient(&goredis.Options{Addr: addr})
	defer c.Close()
	var vs [2]version
	for i, spec := range specs {
		v, err := load(ctx, c, spec)
		if err != nil {
			return err
		}
		vs[i] = v
	}
	for _, kv := range [][2]string{{"slowlog-log-slower-than", "5"}, {"slowlog-max-len", "100000"}} {
		if err := c.ConfigSet(ctx, kv[0], kv[1]).Err(); err != nil {
			return err
		}
	}
	runID := strconv.FormatUint(rand.Uint64()>>20, 36)
	seq := 0
	// hit sends a Hit of a fresh claim, or with a round version k of them
	// in one call of its round function; with commit, then the Commit of
	// their claims in one settle call.
	hit := func(round, which int) error {
		v := vs[which]
		per := 1
		if v.round {
			per = k
		}
		var keys, claims []string
		var args []any
		var settle []any
		settle = append(settle, "c")
		for range per {
			seq++
			t := "t" + strconv.Itoa(seq%tenants)
			tag := "ab" + runID + "r" + strconv.Itoa(round) + "v" + strconv.Itoa(which) + ":{" + t + "}"
			var buf [8]byte
			binary.BigEndian.PutUint64(buf[:], uint64(seq))
			d := sha256.Sum256(buf[:])
			hook := fmt.Sprintf("01J%023d", seq)
			lay := layouts[which]
			hitArgs := []any{"2", lay.hooks, "1", "60000000", lay.bytes, "1", "60000000", hook, "60000000"}
			if lay.quota {
				// 30-day windows around now, 10^12 hooks each.
				const month = 30 * 24 * 3600 * 1000000
				e := time.Now().UnixMicro() / month * month
				hitArgs = append([]any{"3", lay.hooks, "1", "60000000", lay.bytes, "1", "60000000",
					"monthly#", "1", "1000000000000", e - month, e, e + month, e + 2*month}, hook, "60000000")
			}
			if v.round {
				args = append(args, "h", "2", strconv.Itoa(len(hitArgs)))
			}
			keys = append(keys, tag+lay.key, tag+string(d[:16]))
			args = append(args, hitArgs...)
			claims = append(claims, tag+string(d[:16]))
			settle = append(settle, hook, "60000000")
		}
		var err error
		if v.fcall {
			err = c.FCall(ctx, v.name, keys, args...).Err()
		} else {
			err = c.EvalSha(ctx, v.name, keys, args...).Err()
		}
		if err != nil || !commit {
			return err
		}
		if v.settle == "" {
			return fmt.Errorf("%s: no settle function to commit with", specs[which])
		}
		return c.FCall(ctx, v.settle, claims, settle...).Err()
	}
	// Per round, each side's µs per Hit and per Commit (a call's time over
	// the Hits or claims in it).
	type side struct{ hit, commit []float64 }
	var all [2]side
	for r := range rounds {
		if err := c.SlowLogReset(ctx).Err(); err != nil {
			return err
		}
		for i := range 2 * n {
			if err := hit(r, i%2); err != nil {
				return err
			}
		}
		logs, err := c.SlowLogGet(ctx, -1).Result()
		if err != nil {
			return err
		}
		var us [2]side
		for _, l := range logs {
			if len(l.Args) < 2 {
				continue
			}
			for w, v := range vs {
				per := 1.0
				if v.round {
					per = float64(k)
				}
				cmd := "evalsha"
				if v.fcall {
					cmd = "fcall"
				}
				t := float64(l.Duration.Microseconds()) / per
				switch {
				case !strings.EqualFold(l.Args[0], cmd) && !strings.EqualFold(l.Args[0], "fcall"):
				case l.Args[1] == v.name:
					us[w].hit = append(us[w].hit, t)
				case l.Args[1] == v.settle:
					us[w].commit = append(us[w].commit, t)
				}
			}
		}
		fmt.Printf("round %d: A Hit median %.1f µs, mean %.1f (%d calls), Commit median %.1f  "+
			"B Hit median %.1f µs, mean %.1f (%d calls), Commit median %.1f\n",
			r, quantile(us[0].hit, 0.5), trimmedMean(us[0].hit), len(us[0].hit), quantile(us[0].commit, 0.5),
			quantile(us[1].hit, 0.5), trimmedMean(us[1].hit), len(us[1].hit), quantile(us[1].commit, 0.5))
		for w := range all {
			all[w].hit = append(all[w].hit, us[w].hit...)
			all[w].commit = append(all[w].commit, us[w].commit...)
		}
	}
	for w, name := range []string{"A", "B"} {
		fmt.Printf("%s (%s): µs per Hit median %.1f, 10–90%% mean %.1f, p25 %.1f, p75 %.1f, %d calls",
			name, specs[w], quantile(all[w].hit, 0.5), trimmedMean(all[w].hit), quantile(all[w].hit, 0.25),
			quantile(all[w].hit, 0.75), len(all[w].hit))
		if commit {
			fmt.Printf("; per Commit median %.1f, 10–90%% mean %.1f", quantile(all[w].commit, 0.5),
				trimmedMean(all[w].commit))
		}
		fmt.Println()
	}
	return nil
}

// quantile is the q-quantile of x (nearest rank below), 0 when x is empty.
func quantile(x []float64, q float64) float64 {
	if len(x) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(x))
	return s[int(float64(len(s)-1)*q)]
}

// trimmedMean is the mean of x without its lowest and highest tenth: the
// machine's stalls make the highest, the SLOWLOG's threshold cuts the
// lowest.
func trimmedMean(x []float64) float64 {
	s := slices.Sorted(slices.Values(x))
	s = s[len(s)/10 : len(s)-len(s)/10]
	if len(s) == 0 {
		return 0
	}
	var sum float64
	for _, v := range s {
		sum += v
	}
	return sum / float64(len(s))
}
