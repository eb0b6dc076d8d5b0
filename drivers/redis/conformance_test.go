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
