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
			conformance.Run(t, conformance.Config{
				URL:         "memcached://" + strings.Join(addrs, ","),
				AddrURL:     func(a string) string { return "memcached://" + a },
				Granularity: granularity,
				Records: func(ctx context.Context, prefix, tenant string) ([]conformance.Record, error) {
					recs, err := mcRecords(ctx, addrs, prefix, tenant)
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
			})
		})
	}
}

// TestConformanceFallback runs the conformance suite against a Store with
// a fallback (fallback_nodes=3, CONTRACT §8) on a healthy memcached, as
// the redis driver's test of the same name does (see there why T1–T4 and
// V4 run apart).
func TestConformanceFallback(t *testing.T) {
	srv := testserver.StartMemcached(t)
	addrs := []string{srv.Addr}
	cfg := conformance.Config{
		URL:         "memcached://" + srv.Addr + "?fallback_nodes=3",
		Granularity: granularity,
		Records: func(ctx context.Context, prefix, tenant string) ([]conformance.Record, error) {
			recs, err := mcRecords(ctx, addrs, prefix, tenant)
			out := make([]conformance.Record, len(recs))
			for i, r := range recs {
				out[i] = conformance.Record{Key: r.Key, TTL: r.TTL}
			}
			return out, err
		},
		Restart: srv.Restart,
	}
	conformance.Run(t, cfg)
	cfg.AddrURL = func(a string) string { return "memcached://" + a + "?fallback_nodes=3" }
	t.Run("T3,T4 with the fallback", func(t *testing.T) {
		reports, err := conformance.Check(cfg, []string{"T3", "T4"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range reports {
			if r.Status != conformance.Pass {
				t.Errorf("%s %s: %s %v", r.ID, r.Title, r.Status, r.Messages)
			}
		}
	})
}
