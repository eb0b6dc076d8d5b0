package rediscore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/fleetstore/fleetstore"
	_ "github.com/fleetstore/fleetstore/drivers/redis"
	_ "github.com/fleetstore/fleetstore/drivers/valkey"
	"github.com/fleetstore/fleetstore/internal/testing/testserver"
)

// The drivers of the core, each with its server binary.
var drivers = []struct{ scheme, bin string }{
	{"redis", "redis-server"},
	{"valkey", testserver.ValkeyBinary()},
}

func count(logs *observer.ObservedLogs, substr string) int {
	n := 0
	for _, e := range logs.All() {
		if strings.Contains(e.Message, substr) {
			n++
		}
	}
	return n
}

// waitCount waits up to d for n entries whose message holds substr, then
// a moment longer for any more, and returns how many there are.
func waitCount(logs *observer.ObservedLogs, substr string, n int, d time.Duration) int {
	deadline := time.Now().Add(d)
	for count(logs, substr) < n && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	return count(logs, substr)
}

// TestSettingsWarnings: both drivers warn once per server, after the first
// answered call, when its settings can lose claims — an eviction policy
// other than noeviction, appendonly off — or make them cost more — listpack
// limits below the claim shards' — and say nothing when they cannot; on a
// cluster once per master.
func TestSettingsWarnings(t *testing.T) {
	for _, d := range drivers {
		for _, tc := range []struct {
			lines                              []string
			wantEvict, wantPersist, wantPacked bool
		}{
			{[]string{"maxmemory-policy allkeys-lru", "appendonly no"}, true, true, false},
			{[]string{"maxmemory-policy volatile-lru", "appendonly yes"}, true, false, false},
			{[]string{"maxmemory-policy noeviction", "appendonly no"}, false, true, false},
			{[]string{"maxmemory-policy noeviction", "appendonly yes", "hash-max-listpack-entries 512", "hash-max-listpack-value 64"}, false, false, false},
			{[]string{"maxmemory-policy noeviction", "appendonly yes", "hash-max-listpack-entries 128"}, false, false, true},
			{[]string{"maxmemory-policy noeviction", "appendonly yes", "hash-max-listpack-value 32"}, false, false, true},
		} {
			t.Run(d.scheme+"/"+strings.Join(tc.lines, ","), func(t *testing.T) {
				t.Parallel()
				srv := testserver.StartRedis(t, testserver.Binary(d.bin), testserver.ConfigLines(tc.lines...))
				t.Logf("server: %s on %s", d.bin, srv.Addr)
				core, logs := observer.New(zapcore.InfoLevel)
				st, err := fleetstore.Open(d.scheme+"://"+srv.Addr+"?timeout=2s", fleetstore.WithLogger(zap.New(core)))
				if err != nil {
					t.Fatal(err)
				}
				defer st.Close()
				for range 5 {
					if err := st.Ping(context.Background()); err != nil {
						t.Fatal(err)
					}
				}
				for _, w := range []struct {
					substr string
					want   bool
				}{{"maxmemory-policy can evict", tc.wantEvict}, {"appendonly is off", tc.wantPersist}, {"hash-max-listpack-entries or -value is below", tc.wantPacked}} {
					want := 0
					if w.want {
						want = 1
					}
					if n := waitCount(logs, w.substr, want, 3*time.Second); n != want {
						t.Errorf("%d %q warnings, want %d: %v", n, w.substr, want, logs.All())
					}
				}
			})
		}
	}
	for _, d := range drivers {
		t.Run(d.scheme+"/cluster", func(t *testing.T) {
			t.Parallel()
			cl := testserver.StartCluster(t, testserver.Binary(d.bin), testserver.ConfigLines("maxmemory-policy allkeys-lfu"))
			core, logs := observer.New(zapcore.InfoLevel)
			st, err := fleetstore.Open(cl.URLScheme(d.scheme)+"&timeout=2s", fleetstore.WithLogger(zap.New(core)))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			if _, err := st.Hit(context.Background(), []fleetstore.Charge{{Kind: fleetstore.Hooks, Tenant: "t", Increment: time.Millisecond, Capacity: time.Second}}, nil); err != nil {
				t.Fatal(err)
			}
			if n := waitCount(logs, "maxmemory-policy can evict", 3, 5*time.Second); n != 3 {
				t.Errorf("%d eviction warnings, want one per master (3)", n)
			}
		})
	}
}
