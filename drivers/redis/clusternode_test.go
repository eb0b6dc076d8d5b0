package redis

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/internal/testing/testserver"
)

// TestSingleURLAtClusterNode: redis:// pointed at one node of a cluster
// answers Ping, then every call on a slot of another node is MOVED: the
// error says so and names the URL to use, instead of failing alike
// forever with a bare MOVED.
func TestSingleURLAtClusterNode(t *testing.T) {
	t.Parallel()
	cl := testserver.StartCluster(t)
	st, err := fleetstore.Open("redis://"+cl.Nodes[0].Addr, fleetstore.WithTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Ping(ctx(t)); err != nil {
		t.Fatal(err)
	}
	moved := 0
	for i := range 12 {
		tenant := "t" + strings.Repeat("x", i)
		_, err := st.Hit(ctx(t), []fleetstore.Charge{hooks(tenant)}, nil)
		if err == nil {
			continue // the slot is on this node
		}
		moved++
		if !errors.Is(err, fleetstore.ErrUnavailable) || !strings.Contains(err.Error(), "redis+cluster://") {
			t.Errorf("hit of %s: %v, want ErrUnavailable naming redis+cluster://", tenant, err)
		}
	}
	if moved == 0 {
		t.Fatal("every tenant landed on the node opened: nothing checked")
	}
}
