// Command scriptab compares the server time of two versions of the hit
// script on one server: it loads both sources, then runs rounds of Hits
// alternating between them (each on keys of its own), with one tenant
// set of -tenants tenants and fresh claims, and prints EVALSHA
// usec_per_call of each per round and their medians.
//
//	scriptab -addr 127.0.0.1:6379 -a old.lua -b new.lua -n 1000 -rounds 20
//
// Each source is the full script as loaded (claim.lua, a newline,
// hit.lua). Run it on a server nothing else uses.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/fleetstore/fleetstore/bench/internal/cmdstat"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:6379", "server")
	a := flag.String("a", "", "script A source file")
	b := flag.String("b", "", "script B source file")
	n := flag.Int("n", 1000, "Hits per round per script")
	rounds := flag.Int("rounds", 20, "rounds")
	tenants := flag.Int("tenants", 1000, "tenants")
	flag.Parse()
	if err := run(*addr, *a, *b, *n, *rounds, *tenants); err != nil {
		fmt.Fprintln(os.Stderr, "scriptab:", err)
		os.Exit(1)
	}
}

func run(addr, fa, fb string, n, rounds, tenants int) error {
	ctx := context.Background()
	c := goredis.NewClient(&goredis.Options{Addr: addr})
	defer c.Close()
	var shas [2]string
	for i, f := range []string{fa, fb} {
		src, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		if shas[i], err = c.ScriptLoad(ctx, string(src)).Result(); err != nil {
			return err
		}
	}
	seq := 0
	hit := func(which int) error {
		seq++
		t := "t" + strconv.Itoa(seq%tenants)
		tag := "ab" + strconv.Itoa(which) + ":{" + t + "}"
		var buf [8]byte
		binary.BigEndian.PutUint64(buf[:], uint64(seq))
		d := sha256.Sum256(buf[:])
		keys := []string{tag + ":b", tag + string(d[:16])}
		args := []any{2, "hooks", 1, 60000000, "bytes", 1, 60000000, fmt.Sprintf("01J%023d", seq),
			60000000}
		return c.EvalSha(ctx, shas[which], keys, args...).Err()
	}
	var us, cpu [2][]float64
	for r := 0; r < rounds; r++ {
		for w := 0; w < 2; w++ {
			if err := c.ConfigResetStat(ctx).Err(); err != nil {
				return err
			}
			c0, err := mainCPU(ctx, c)
			if err != nil {
				return err
			}
			for range n {
				if err := hit(w); err != nil {
					return err
				}
			}
			c1, err := mainCPU(ctx, c)
			if err != nil {
				return err
			}
			info, err := c.Info(ctx, "commandstats").Result()
			if err != nil {
				return err
			}
			us[w] = append(us[w], usec(info))
			cpu[w] = append(cpu[w], (c1-c0)*1e6/float64(n))
		}
		fmt.Printf("round %d: A %.1f µs (CPU %.1f)  B %.1f µs (CPU %.1f)\n", r, us[0][r], cpu[0][r],
			us[1][r], cpu[1][r])
	}
	for w, name := range []string{"A", "B"} {
		s := slices.Clone(us[w])
		slices.Sort(s)
		u := slices.Clone(cpu[w])
		slices.Sort(u)
		fmt.Printf("%s: EVALSHA usec_per_call median %.1f, min %.1f; server main-thread CPU µs per "+
			"call median %.1f, min %.1f\n",
			name, s[len(s)/2], s[0], u[len(u)/2], u[0])
	}
	return nil
}

// mainCPU is the server's main thread's CPU time, s (INFO cpu
// used_cpu_sys_main_thread + used_cpu_user_main_thread, Redis 6.2+): what
// the scripts cost, whatever else the machine runs.
func mainCPU(ctx context.Context, c *goredis.Client) (float64, error) {
	info, err := c.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, err
	}
	var sum float64
	found := 0
	for _, line := range strings.Split(info, "\n") {
		for _, k := range []string{"used_cpu_sys_main_thread:", "used_cpu_user_main_thread:"} {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), k); ok {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					return 0, err
				}
				sum += f
				found++
			}
		}
	}
	if found != 2 {
		return 0, fmt.Errorf("INFO cpu has no main-thread times")
	}
	return sum, nil
}

// usec is EVALSHA's usec_per_call in an INFO commandstats reply.
func usec(info string) float64 {
	for _, st := range cmdstat.Parse(info) {
		if st.Name == "evalsha" {
			f, _ := strconv.ParseFloat(st.UsecPerCall, 64)
			return f
		}
	}
	return 0
}
