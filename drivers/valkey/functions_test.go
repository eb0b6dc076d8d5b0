package valkey

import (
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
