package memcached

import (
	"context"
	"strings"
	"testing"

	"github.com/fleetstore/fleetstore/conformance"
	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/internal/testserver"
)

func TestConformance(t *testing.T) {
	for _, n := range []int{1, 2} {
		t.Run(map[int]string{1: "one server", 2: "two servers"}[n], func(t *testing.T) {
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
