package memcached

import (
	"context"
	"strings"
	"testing"

	"github.com/fleetstore/fleetstore/conformance"
	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/internal/testing/testserver"
)

// TestConformance runs the whole conformance suite on one memcached and
// on two, at once and beside the other configurations (t.Parallel).
func TestConformance(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 2} {
		t.Run(map[int]string{1: "one server", 2: "two servers"}[n], func(t *testing.T) {
			t.Parallel()
			servers := make([]*testserver.Memcached, n)
			addrs := make([]string, n)
			for i := range servers {
				servers[i] = testserver.StartMemcached(t)
				addrs[i] = servers[i].Addr
			}
			conformance.Run(t, suiteConfig("memcached://"+strings.Join(addrs, ","), servers))
		})
	}
}

// suiteConfig is the conformance suite's Config for a store URL on
// servers: their records read over their plain addresses, Restart
// restarting them all.
func suiteConfig(raw string, servers []*testserver.Memcached) conformance.Config {
	plain := make([]string, len(servers))
	for i, s := range servers {
		plain[i] = s.Addr
	}
	return conformance.Config{
		URL: raw,
		Records: func(ctx context.Context, prefix, tenant string) ([]driver.Record, error) {
			return mcRecords(ctx, plain, prefix, tenant)
		},
		Restart: func() error {
			for _, s := range servers {
				if err := s.Restart(); err != nil {
					return err
				}
			}
			return nil
		},
	}
}

// TestConformanceFallback runs the conformance suite against a Store with
// a fallback (fallback_nodes=3, CONTRACT §8) on a healthy memcached, as
// the redis driver's test of the same name does (see there why T1, T2
// and V4 do not run).
// localDecision is why the fallback Store omits T1, T2 and V4.
const localDecision = "with a fallback, a dead, refused or lying store is a local decision (CONTRACT §8)"

func TestConformanceFallback(t *testing.T) {
	t.Parallel()
	srv := testserver.StartMemcached(t)
	addrs := []string{srv.Addr}
	cfg := conformance.Config{
		URL: "memcached://" + srv.Addr + "?fallback_nodes=3",
		Records: func(ctx context.Context, prefix, tenant string) ([]driver.Record, error) {
			return mcRecords(ctx, addrs, prefix, tenant)
		},
		Restart: srv.Restart,
	}
	// T1, T2 and V4 aim the Store at a dead, refused or lying address:
	// with a fallback those errors are local decisions (CONTRACT §8).
	// Every other clause runs on the fallback Store, T3 and T4 against the
	// suite's own listeners (the default AddrURL keeps fallback_nodes).
	cfg.Omit = map[string]string{"T1": localDecision, "T2": localDecision, "V4": localDecision}
	conformance.Run(t, cfg)
}
