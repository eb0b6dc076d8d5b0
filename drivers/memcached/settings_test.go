package memcached

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/internal/testing/testserver"
)

// TestEvictionWarning: a Store on a memcached that evicts (the default)
// warns once per server, after its first Hit, that evictions lose limits,
// quota counts and claims; on one run with -M (no evictions) it does not.
func TestEvictionWarning(t *testing.T) {
	t.Parallel()
	evicting := testserver.StartMemcached(t).Addr
	strict := testserver.StartMemcached(t, "-M").Addr
	for _, tc := range []struct {
		addr  string
		warns int
	}{{evicting, 1}, {strict, 0}} {
		core, logs := observer.New(zap.DebugLevel)
		st := openStore(t, []string{tc.addr}, 5*time.Second, fleetstore.WithLogger(zap.New(core)))
		limit := fleetstore.MustLimit(fleetstore.NewLimit(fleetstore.Hooks, 1000, time.Second, 1000))
		for range 3 {
			if _, err := st.Hit(context.Background(), []fleetstore.Charge{limit.Charge("t", 1)}, nil); err != nil {
				t.Fatal(err)
			}
		}
		deadline := time.Now().Add(10 * time.Second)
		for logs.FilterMessage(warnEviction).Len()+logs.FilterMessage("memcached: the server does not evict").Len() == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("server %s: settings not checked 10s after its Hits", tc.addr)
			}
			time.Sleep(10 * time.Millisecond)
		}
		st.Close()
		if n := logs.FilterMessage(warnEviction).FilterField(zap.String("server", tc.addr)).Len(); n != tc.warns {
			t.Errorf("server %s: %d eviction warnings, want %d: %v", tc.addr, n, tc.warns, logs.All())
		}
	}
}
