package valkey

import (
	"strings"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore/driver"
)

// TestLibraryOnEveryNode: the first call on a cluster loads the scripts'
// function library on every master; a library flushed from one master is
// loaded there again at the next call that misses it, and every call
// succeeds meanwhile (EVAL).
func TestLibraryOnEveryNode(t *testing.T) {
	t.Parallel()
	cl := startCluster(t)
	c := testConn(t, cl.URLScheme("valkey"), time.Second, nil)
	hit := func(tenant string) {
		t.Helper()
		res, err := c.Hit(budget(t, time.Second), hooks(tenant, time.Millisecond, time.Hour), nil)
		if err != nil || res.Outcome != driver.OK {
			t.Fatalf("hit: %v %v", res, err)
		}
	}
	hit("t-" + randName())
	waitLibrary(t, cl.Nodes...)
	if _, err := cl.Nodes[1].Do("FUNCTION", "FLUSH"); err != nil {
		t.Fatal(err)
	}
	for i := range 30 { // tenants of every master
		hit("t-" + randName() + string(rune('a'+i)))
	}
	waitLibrary(t, cl.Nodes...)
}

// TestFunctionsRefused: a server user allowed EVALSHA but not FCALL still
// gets every decision, the first call by EVAL, every later one by EVALSHA.
func TestFunctionsRefused(t *testing.T) {
	t.Parallel()
	r := startServer(t)
	if _, err := r.Do("ACL", "SETUSER", "edge", "on", ">pw", "~*", "+@all", "-fcall"); err != nil {
		t.Fatal(err)
	}
	c := testConn(t, "valkey://edge:pw@"+r.Addr, 5*time.Second, nil)
	for i := range 3 {
		res, err := c.Hit(budget(t, 5*time.Second), hooks("t-"+randName(), time.Millisecond, time.Hour), nil)
		if err != nil || res.Outcome != driver.OK {
			t.Fatalf("hit %d: %v %v", i, res, err)
		}
	}
	info, err := r.Info("commandstats")
	if err != nil {
		t.Fatal(err)
	}
	for cmd, want := range map[string]string{"evalsha": "calls=2,", "eval": "calls=1,"} {
		if !strings.Contains(info, "cmdstat_"+cmd+":"+want) {
			t.Errorf("%s: want %s in INFO commandstats:\n%s", cmd, want, info)
		}
	}
}
