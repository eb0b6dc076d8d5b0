package redis

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/internal/scripts"
	"github.com/fleetstore/fleetstore/internal/testing/testserver"
)

// TestPeekWritesNothing: on redis-server and valkey-server, a Peek is one
// FCALL of the library's peek function that leaves the server's count of
// changes (rdb_changes_since_last_save, every write, an expiry's too)
// where it was and calls no write command (CONTRACT G11); and the
// no-writes flag is what keeps it so, the function's as the script's (run
// when the library is missing): each with a write added fails on the
// server, and writes once the flag is taken away.
func TestPeekWritesNothing(t *testing.T) {
	t.Parallel()
	for _, bin := range []string{"redis-server", "valkey-server"} {
		t.Run(bin, func(t *testing.T) {
			t.Parallel()
			srv := testserver.StartRedis(t, testserver.Binary(bin))
			st, prefix := openStore(t, srv.URL())
			tenant := "t-" + randHex(4)
			// One an hour: the charge is still there however long a loaded
			// machine stalls between the Hit and the Peeks.
			limit := fleetstore.MustLimit(fleetstore.NewLimit(fleetstore.Hooks, 1, time.Hour, 60))
			mustHit(t, st, []fleetstore.Charge{limit.Charge(tenant, 1)}, nil, fleetstore.OK)
			peek := func() {
				t.Helper()
				res, err := st.Peek(ctx(t), tenant, limit)
				if err != nil || res.Outcome != fleetstore.OK || limit.Remaining(res.Quota()[0]) != 59 {
					t.Fatalf("peek: %+v %v, want OK with 59 left", res, err)
				}
			}
			peek() // the library is loaded (EVAL meanwhile)
			waitLibrary(t, srv)
			changes := func() int {
				t.Helper()
				info, err := srv.Info("persistence")
				if err != nil {
					t.Fatal(err)
				}
				return infoInt(t, info, "rdb_changes_since_last_save")
			}
			dirty := changes()
			before, err := srv.Info("commandstats")
			if err != nil {
				t.Fatal(err)
			}
			const n = 10
			for range n {
				peek()
			}
			after, err := srv.Info("commandstats")
			if err != nil {
				t.Fatal(err)
			}
			if d := changes() - dirty; d != 0 {
				t.Errorf("%d peeks changed the dataset %d times, want none", n, d)
			}
			for cmd, want := range map[string]int{"fcall": n, "evalsha": 0, "eval": 0, "hmget": n, "hset": 0,
				"pexpireat": 0, "pexpire": 0, "del": 0} {
				if d := cmdStat(after, cmd) - cmdStat(before, cmd); d != want {
					t.Errorf("%d peeks called %s %d times, want %d", n, cmd, d, want)
				}
			}

			// The flag at work: the script with a write added after its
			// clock is read (an HSET: a write whether or not the bucket
			// is still there).
			key := scripts.ShardKey(prefix, tenant, 0)
			clock := "local now = tonumber(t[1]) * 1000000 + tonumber(t[2])\n"
			if !strings.Contains(scripts.Peek.Source, clock) {
				t.Fatal("the peek script no longer reads the clock as this test expects")
			}
			writing := strings.Replace(scripts.Peek.Source, clock,
				clock+"redis.call('HSET', KEYS[1], 'control', '1')\n", 1)
			_, err = srv.Do("EVAL", writing, "1", key, "hooks")
			if err == nil || !strings.Contains(err.Error(), "not allowed from read-only scripts") {
				t.Errorf("the peek script with a write: %v, want the server's refusal", err)
			}
			if d := changes() - dirty; d != 0 {
				t.Errorf("the refused script changed the dataset %d times", d)
			}
			unflagged := strings.TrimPrefix(writing, "#!lua flags=no-writes\n")
			if unflagged == writing {
				t.Fatal("the peek script does not start with its no-writes flag")
			}
			if _, err := srv.Do("EVAL", unflagged, "1", key, "hooks"); err != nil {
				t.Fatalf("the script with a write, without the flag: %v", err)
			}
			if changes() == dirty {
				t.Errorf("the control wrote nothing: this test proves nothing")
			}

			// The function's flag likewise, in a copy of the library under
			// a name of its own, with and without the flag.
			lib := func(name, flags string) string {
				src := strings.ReplaceAll(scripts.Library.Source, scripts.Library.Name, name)
				src = strings.Replace(src, clock, clock+"redis.call('HSET', KEYS[1], 'control', '2')\n", 1)
				return strings.Replace(src, ", flags = {'no-writes'}", flags, 1)
			}
			fn := strings.Replace(scripts.Peek.Function, scripts.Library.Name, "w"+randHex(4), 1)
			name := fn[:strings.LastIndexByte(fn, '_')]
			if src := lib(name, ", flags = {'no-writes'}"); !strings.Contains(src, "'control', '2'") {
				t.Fatal("the library's peek no longer reads the clock as this test expects")
			}
			if _, err := srv.Do("FUNCTION", "LOAD", lib(name, ", flags = {'no-writes'}")); err != nil {
				t.Fatal(err)
			}
			dirty = changes()
			_, err = srv.Do("FCALL", fn, "1", key, "hooks")
			if err == nil || !strings.Contains(err.Error(), "not allowed from read-only scripts") {
				t.Errorf("the peek function with a write: %v, want the server's refusal", err)
			}
			if d := changes() - dirty; d != 0 {
				t.Errorf("the refused function changed the dataset %d times", d)
			}
			if _, err := srv.Do("FUNCTION", "LOAD", "REPLACE", lib(name, "")); err != nil {
				t.Fatal(err)
			}
			dirty = changes()
			if _, err := srv.Do("FCALL", fn, "1", key, "hooks"); err != nil {
				t.Fatalf("the function with a write, without the flag: %v", err)
			}
			if changes() == dirty {
				t.Errorf("the function's control wrote nothing: this test proves nothing")
			}
		})
	}
}

// infoInt returns field's integer value in INFO text.
func infoInt(t *testing.T, info, field string) int {
	t.Helper()
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("INFO %s: %q", field, v)
			}
			return n
		}
	}
	t.Fatalf("INFO has no %s", field)
	return 0
}
