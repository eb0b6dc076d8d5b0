package memcached

import (
	"context"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/internal/testing/testserver"
)

// TestPeekWritesNothing: a Peek is one get of the tenant's bucket item:
// memcached counts one get (a hit) per Peek and no set, add, cas, touch,
// delete or arithmetic, so no item and no expiry moved (CONTRACT G11).
func TestPeekWritesNothing(t *testing.T) {
	t.Parallel()
	addrs := startServers(t, 1)
	st := openStore(t, addrs, 5*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tenant := "t-" + randName()
	// One an hour: the charge is still there however long a loaded machine
	// stalls between the Hit and the Peeks.
	limit := fleetstore.MustLimit(fleetstore.NewLimit(fleetstore.Hooks, 1, time.Hour, 60))
	if res, err := st.Hit(ctx, []fleetstore.Charge{limit.Charge(tenant, 1)}, nil); err != nil || res.Outcome != fleetstore.OK {
		t.Fatalf("hit: %+v %v", res, err)
	}
	before := testserver.MemcachedStats(t, addrs[0], "")
	const n = 10
	for range n {
		res, err := st.Peek(ctx, tenant, limit)
		if err != nil || res.Outcome != fleetstore.OK || limit.Remaining(res.Quota()[0]) != 59 {
			t.Fatalf("peek: %+v %v, want OK with 59 left", res, err)
		}
	}
	after := testserver.MemcachedStats(t, addrs[0], "")
	for stat, want := range map[string]int64{"cmd_get": n, "get_hits": n, "cmd_set": 0, "cmd_touch": 0,
		"delete_hits": 0, "delete_misses": 0, "incr_misses": 0, "incr_hits": 0, "decr_misses": 0, "decr_hits": 0} {
		if d := after[stat] - before[stat]; d != want {
			t.Errorf("%d peeks: %s %+d, want %+d", n, stat, d, want)
		}
	}
}
