package redis

import (
	"testing"

	"github.com/fleetstore/fleetstore/conformance"
	"github.com/fleetstore/fleetstore/internal/testserver"
)

// TestConformance runs the whole conformance suite against one
// redis-server.
func TestConformance(t *testing.T) {
	srv := testserver.StartRedis(t)
	admin := adminClient(t, "", srv.Addr)
	conformance.Run(t, conformance.Config{
		URL:     srv.URL() + "/0",
		AddrURL: func(addr string) string { return "redis://" + addr + "/0" },
		Records: records(admin),
		Restart: srv.Restart,
		FlushScripts: func() error {
			_, err := srv.Do("SCRIPT", "FLUSH")
			return err
		},
	})
}

// TestConformanceCluster runs the whole conformance suite against a
// three-master Redis Cluster.
func TestConformanceCluster(t *testing.T) {
	cl := testserver.StartCluster(t)
	admin := adminClient(t, "", cl.Addrs()...)
	conformance.Run(t, conformance.Config{
		URL:          cl.URL(),
		AddrURL:      func(addr string) string { return "redis+cluster://" + addr },
		Records:      records(admin),
		Restart:      cl.Restart,
		FlushScripts: func() error { return cl.DoAll("SCRIPT", "FLUSH") },
	})
}

// TestConformanceFallback runs the conformance suite against a Store with
// a fallback (fallback_nodes=3, CONTRACT §8) on a healthy redis-server:
// while the shared store answers, the degraded mode changes nothing. The
// clauses that aim a Store at a dead or silent address (T1's silent part,
// T2, V4) are about the errors the fallback turns into local decisions, so
// the full run has no AddrURL; T3 and T4 (Open does no I/O; calls succeed
// once the server appears; nothing outlives Close, the probe included)
// then run with the fallback against the suite's own listeners.
func TestConformanceFallback(t *testing.T) {
	srv := testserver.StartRedis(t)
	admin := adminClient(t, "", srv.Addr)
	cfg := conformance.Config{
		URL:     srv.URL() + "/0?fallback_nodes=3",
		Records: records(admin),
		Restart: srv.Restart,
		FlushScripts: func() error {
			_, err := srv.Do("SCRIPT", "FLUSH")
			return err
		},
	}
	conformance.Run(t, cfg)
	cfg.AddrURL = func(addr string) string { return "redis://" + addr + "/0?fallback_nodes=3" }
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
