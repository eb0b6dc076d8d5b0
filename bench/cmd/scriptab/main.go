// Command scriptab compares the server time of two versions of the hit
// script on one server: it loads both, then runs rounds of Hits that
// alternate between them call by call (each on keys of its own: fresh
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
//	                   function named …_hit is called
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
	flag.Parse()
	if *dump {
		fmt.Print(scripts.Library.Source)
		return
	}
	if err := run(*addr, [2]string{*a, *b}, *n, *rounds, *tenants); err != nil {
		fmt.Fprintln(os.Stderr, "scriptab:", err)
		os.Exit(1)
	}
}

// version is one side of the comparison: how it is called and the name
// the SLOWLOG shows as the command's second argument.
type version struct {
	fcall bool
	name  string // SHA1 or function
}

var hitFunction = regexp.MustCompile(`function_name = '([A-Za-z0-9_]*_hit)'`)

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
	case "fcall":
		m := hitFunction.FindSubmatch(src)
		if m == nil {
			return version{}, fmt.Errorf("%s registers no function named …_hit", file)
		}
		if err := c.FunctionLoadReplace(ctx, string(src)).Err(); err != nil {
			return version{}, err
		}
		return version{fcall: true, name: string(m[1])}, nil
	}
	return version{}, fmt.Errorf("%q: want FILE, eval:FILE or fcall:FILE", spec)
}

func run(addr string, specs [2]string, n, rounds, tenants int) error {
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
	hit := func(round, which int) error {
		seq++
		t := "t" + strconv.Itoa(seq%tenants)
		tag := "ab" + runID + "r" + strconv.Itoa(round) + "v" + strconv.Itoa(which) + ":{" + t + "}"
		var buf [8]byte
		binary.BigEndian.PutUint64(buf[:], uint64(seq))
		d := sha256.Sum256(buf[:])
		keys := []string{tag + ":b", tag + string(d[:16])}
		args := []any{2, "hooks", 1, 60000000, "bytes", 1, 60000000, fmt.Sprintf("01J%023d", seq),
			60000000}
		v := vs[which]
		if v.fcall {
			return c.FCall(ctx, v.name, keys, args...).Err()
		}
		return c.EvalSha(ctx, v.name, keys, args...).Err()
	}
	var all [2][]float64
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
		var us [2][]float64
		for _, l := range logs {
			if len(l.Args) < 2 {
				continue
			}
			for w, v := range vs {
				cmd := "evalsha"
				if v.fcall {
					cmd = "fcall"
				}
				if strings.EqualFold(l.Args[0], cmd) && l.Args[1] == v.name {
					us[w] = append(us[w], float64(l.Duration.Microseconds()))
				}
			}
		}
		fmt.Printf("round %d: A median %.0f µs, mean %.1f (%d calls)  "+
			"B median %.0f µs, mean %.1f (%d calls)\n",
			r, quantile(us[0], 0.5), trimmedMean(us[0]), len(us[0]),
			quantile(us[1], 0.5), trimmedMean(us[1]), len(us[1]))
		all[0], all[1] = append(all[0], us[0]...), append(all[1], us[1]...)
	}
	for w, name := range []string{"A", "B"} {
		fmt.Printf("%s (%s): µs per call median %.0f, 10–90%% mean %.1f, p25 %.0f, p75 %.0f, "+
			"%d calls\n",
			name, specs[w], quantile(all[w], 0.5), trimmedMean(all[w]), quantile(all[w], 0.25),
			quantile(all[w], 0.75), len(all[w]))
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
