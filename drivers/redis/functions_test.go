package redis

import (
	"testing"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/internal/scripts"
	"github.com/fleetstore/fleetstore/internal/testing/testserver"
)

// TestFunctionsRefused: a server user allowed EVALSHA and EVAL but not
// FCALL, or FCALL but not FUNCTION LOAD, still gets every decision: the
// call that meets the refusal runs with EVAL (it did not run: T5), and
// every later call with EVALSHA; the refusal is logged once.
func TestFunctionsRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, rules string }{
		{"no FCALL", "-fcall"},
		{"no FUNCTION LOAD", "-function"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := testserver.StartRedis(t)
			if _, err := srv.Do("ACL", "SETUSER", "edge", "on", ">pw", "~*", "+@all", tc.rules); err != nil {
				t.Fatal(err)
			}
			log, logs := observed()
			st, _ := openStore(t, "redis://edge:pw@"+srv.Addr, fleetstore.WithLogger(log))
			tenant := "t-" + randHex(4)
			one := fleetstore.Charge{Kind: fleetstore.Hooks, Tenant: tenant, Increment: time.Hour, Capacity: 3 * time.Hour}
			mustHit(t, st, []fleetstore.Charge{one}, claim(tenant, "s", "k0", "h0"), fleetstore.OK)
			if !waitLog(logs, "refuses script functions", 5*time.Second) {
				t.Fatal("no log of the refusal")
			}
			before, _ := srv.Info("commandstats")
			mustHit(t, st, []fleetstore.Charge{one}, claim(tenant, "s", "k1", "h1"), fleetstore.OK)
			if err := st.Commit(ctx(t), *claim(tenant, "s", "k1", "h1")); err != nil {
				t.Fatalf("commit: %v", err)
			}
			mustHit(t, st, nil, claim(tenant, "s", "k1", "h2"), fleetstore.Duplicate)
			mustHit(t, st, []fleetstore.Charge{one}, nil, fleetstore.OK)
			mustHit(t, st, []fleetstore.Charge{one}, nil, fleetstore.RateLimited)
			after, _ := srv.Info("commandstats")
			// The settle script's first EVALSHA meets NOSCRIPT: one EVAL.
			for cmd, want := range map[string]int{"evalsha": 5, "eval": 1, "fcall": 0} {
				if d := cmdStat(after, cmd) - cmdStat(before, cmd); d != want {
					t.Errorf("%d %s for 5 calls after the refusal, want %d", d, cmd, want)
				}
			}
			if n := count(logs, "refuses script functions"); n != 1 {
				t.Errorf("the refusal logged %d times, want once", n)
			}
			if v, err := srv.Do("FUNCTION", "LIST"); err != nil || len(v.([]any)) != 0 {
				t.Errorf("FUNCTION LIST: %v %v, want no library", v, err)
			}
		})
	}
}

// TestFunctionOutOfMemory: a server past its maxmemory (noeviction)
// refuses a function that may write before it runs, where a script is
// refused at its first write only: a Hit that writes nothing (a denial, a
// duplicate) is answered as before, by EVAL, and one that would write
// fails as before (ErrUnavailable).
func TestFunctionOutOfMemory(t *testing.T) {
	t.Parallel()
	srv := testserver.StartRedis(t)
	st, _ := openStore(t, srv.URL())
	tenant := "t-" + randHex(4)
	one := fleetstore.Charge{Kind: fleetstore.Hooks, Tenant: tenant, Increment: time.Hour, Capacity: time.Hour}
	mustHit(t, st, []fleetstore.Charge{one}, claim(tenant, "s", "k", "h"), fleetstore.OK)
	if err := st.Commit(ctx(t), *claim(tenant, "s", "k", "h")); err != nil {
		t.Fatal(err)
	}
	waitLibrary(t, srv)
	if _, err := srv.Do("CONFIG", "SET", "maxmemory", "1"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = srv.Do("CONFIG", "SET", "maxmemory", "0") })
	mustHit(t, st, []fleetstore.Charge{one}, nil, fleetstore.RateLimited)
	mustHit(t, st, nil, claim(tenant, "s", "k", "h2"), fleetstore.Duplicate)
	_, err := st.Hit(ctx(t), nil, claim(tenant, "s", "k2", "h"))
	wantErrIs(t, "a claim out of memory", err, fleetstore.ErrUnavailable)
	info, _ := srv.Info("commandstats")
	if cmdStat(info, "fcall") == 0 {
		t.Fatal("no FCALL: the test proves nothing")
	}
}

// TestLibraryOnEveryMaster: the first call on a cluster loads the library
// on every master, not only the one that answered it; a function flushed
// from one master is loaded there again at the next call that misses it.
func TestLibraryOnEveryMaster(t *testing.T) {
	t.Parallel()
	cl := testserver.StartCluster(t)
	st, _ := openStore(t, cl.URL())
	mustHit(t, st, []fleetstore.Charge{hooks("t-" + randHex(4))}, nil, fleetstore.OK)
	waitLibrary(t, cl.Nodes...)
	if _, err := cl.Nodes[1].Do("FUNCTION", "FLUSH"); err != nil {
		t.Fatal(err)
	}
	// Tenants of every master: a Hit of each ends on every node.
	for i := range 30 {
		mustHit(t, st, []fleetstore.Charge{hooks("t-" + randHex(4) + string(rune('a'+i)))}, nil, fleetstore.OK)
	}
	waitLibrary(t, cl.Nodes...)
	for _, n := range cl.Nodes {
		v, err := n.Do("FUNCTION", "LIST")
		if err != nil || len(v.([]any)) != 1 {
			t.Errorf("%s: FUNCTION LIST %v %v, want the one library %s", n.Addr, v, err, scripts.Library.Name)
		}
	}
}
