package testserver_test

import (
	"testing"
	"time"

	"github.com/fleetstore/fleetstore/internal/testserver"
)

// TestStartSentinel: the Sentinels agree on the master, and SENTINEL
// FAILOVER promotes the replica, for redis-server and valkey-server.
func TestStartSentinel(t *testing.T) {
	for _, bin := range []string{"redis-server", testserver.ValkeyBinary()} {
		t.Run(bin, func(t *testing.T) {
			start := time.Now()
			s := testserver.StartSentinel(t, testserver.Binary(bin))
			t.Logf("%s: master, replica and 3 sentinels ready in %v", bin, time.Since(start))
			m, err := s.Master()
			if err != nil || m != s.Nodes[0] {
				t.Fatalf("master %v, %v: want the first node", m, err)
			}
			start = time.Now()
			if err := s.Failover(); err != nil {
				t.Fatal(err)
			}
			if err := s.WaitMaster(s.Nodes[1].Addr, 30*time.Second); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: failed over in %v", bin, time.Since(start))
		})
	}
}
