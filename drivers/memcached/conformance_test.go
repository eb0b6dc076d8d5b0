package memcached

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore/conformance"
	"github.com/fleetstore/fleetstore/internal/testserver"
)

// granularity is how long an item may outlive its expiry: memcached's
// whole-second clock, plus the second the driver adds so that no item
// expires early (see expiration).
const granularity = 2 * time.Second

func TestConformance(t *testing.T) {
	for _, n := range []int{1, 2} {
		t.Run(map[int]string{1: "one server", 2: "two servers"}[n], func(t *testing.T) {
			servers := make([]*testserver.Memcached, n)
			addrs := make([]string, n)
			for i := range servers {
				servers[i] = testserver.StartMemcached(t)
				addrs[i] = servers[i].Addr
			}
			conformance.Run(t, suiteConfig("memcached://"+strings.Join(addrs, ","),
				func(a string) string { return "memcached://" + a }, servers))
		})
	}
}

// suiteConfig is the conformance suite's Config for a store URL on
// servers: their records read over their plain addresses, Restart
// restarting them all.
func suiteConfig(raw string, addrURL func(string) string, servers []*testserver.Memcached) conformance.Config {
	plain := make([]string, len(servers))
	for i, s := range servers {
		plain[i] = s.Addr
	}
	return conformance.Config{
		URL:         raw,
		AddrURL:     addrURL,
		Granularity: granularity,
		Records: func(ctx context.Context, prefix, tenant string) ([]conformance.Record, error) {
			recs, err := mcRecords(ctx, plain, prefix, tenant)
			out := make([]conformance.Record, len(recs))
			for i, r := range recs {
				out[i] = conformance.Record{Key: r.Key, TTL: r.TTL}
			}
			return out, err
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
