package testserver_test

import (
	"testing"
	"time"

	"github.com/fleetstore/fleetstore/internal/testing/testserver"
)

// TestStartSentinel: the Sentinels agree on the master, and SENTINEL
// FAILOVER promotes the replica, for redis-server and valkey-server, over
// TLS too, the three side by side.
func TestStartSentinel(t *testing.T) {
	t.Parallel()
	certs := testserver.NewCerts(t)
	for _, tt := range []struct {
		name string
		opts []testserver.RedisOption
	}{
		{"redis-server", nil},
		{testserver.ValkeyBinary(), []testserver.RedisOption{testserver.Binary(testserver.ValkeyBinary())}},
		{"redis-server over TLS", []testserver.RedisOption{testserver.TLS(certs, true)}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			s := testserver.StartSentinel(t, tt.opts...)
			t.Logf("master, replica and 3 sentinels ready in %v: sentinels %v", time.Since(start), s.Addrs())
			m, err := s.Master()
			if err != nil || m != s.Nodes[0] {
				t.Fatalf("master %v, %v: want the first node", m, err)
			}
			start = time.Now()
			if err := s.Failover(); err != nil {
				t.Fatal(err)
			}
			if err := s.WaitMaster(s.Nodes[1], 30*time.Second); err != nil {
				t.Fatal(err)
			}
			addr, _ := s.MasterAddr()
			t.Logf("failed over in %v: the master is %s", time.Since(start), addr)
		})
	}
}
