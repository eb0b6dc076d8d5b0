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
// they do not run here; T3 and T4 (Open does no I/O; calls succeed once
// the server appears; nothing outlives Close, the probe included) run
// with the fallback against the suite's own listeners.
// localDecision is why the fallback Store omits T1, T2 and V4.
const localDecision = "with a fallback, a dead, refused or lying store is a local decision (CONTRACT §8)"

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
	// T1, T2 and V4 aim the Store at a dead, refused or lying address:
	// with a fallback those errors are local decisions (CONTRACT §8).
	// Every other clause runs on the fallback Store, T3 and T4 against the
	// suite's own listeners (the default AddrURL keeps fallback_nodes).
	cfg.Omit = map[string]string{"T1": localDecision, "T2": localDecision, "V4": localDecision}
	conformance.Run(t, cfg)
}
