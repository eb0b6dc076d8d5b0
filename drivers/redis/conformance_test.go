package redis

import (
	"testing"

	"github.com/fleetstore/fleetstore/conformance"
	"github.com/fleetstore/fleetstore/internal/testing/testserver"
)

// TestConformance runs the whole conformance suite against one
// redis-server.
func TestConformance(t *testing.T) {
	t.Parallel()
	conformance.Run(t, serverSuite(t, testserver.StartRedis(t), ""))
}

// TestConformanceCluster runs the whole conformance suite against a
// three-master Redis Cluster.
func TestConformanceCluster(t *testing.T) {
	t.Parallel()
	conformance.Run(t, clusterSuite(t, testserver.StartCluster(t), ""))
}

// serverSuite is the conformance config of srv, with the query
// parameters q ("name=value&…", or "") on its URL.
func serverSuite(t *testing.T, srv *testserver.Redis, q string) conformance.Config {
	admin := adminClient(t, "", srv.Addr)
	u := srv.URL() + "/0"
	if q != "" {
		u = withQuery(u, q)
	}
	return conformance.Config{
		URL:          u,
		Records:      records(admin),
		Restart:      srv.Restart,
		FlushScripts: srv.FlushScripts,
	}
}

// clusterSuite is the conformance config of cl, with the query
// parameters q ("name=value&…", or "") on its URLs.
func clusterSuite(t *testing.T, cl *testserver.Cluster, q string) conformance.Config {
	admin := adminClient(t, "", cl.Addrs()...)
	u, one := cl.URL(), func(addr string) string { return "redis+cluster://" + addr }
	if q != "" {
		u, one = withQuery(u, q), func(addr string) string { return "redis+cluster://" + addr + "?" + q }
	}
	return conformance.Config{
		URL:          u,
		AddrURL:      one,
		Records:      records(admin),
		Restart:      cl.Restart,
		FlushScripts: cl.FlushScripts,
	}
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
	t.Parallel()
	// T1, T2 and V4 aim the Store at a dead, refused or lying address:
	// with a fallback those errors are local decisions (CONTRACT §8).
	// Every other clause runs on the fallback Store, T3 and T4 against the
	// suite's own listeners (the default AddrURL keeps fallback_nodes).
	cfg := serverSuite(t, testserver.StartRedis(t), "fallback_nodes=3")
	cfg.Omit = map[string]string{"T1": localDecision, "T2": localDecision, "V4": localDecision}
	conformance.Run(t, cfg)
}
