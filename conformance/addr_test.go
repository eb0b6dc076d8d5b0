package conformance

import "testing"

// TestSwapHost: the default AddrURL swaps the host, a host list and every
// addr= seed, and keeps the rest; a URL without a host:port has none.
func TestSwapHost(t *testing.T) {
	for _, tt := range []struct {
		give, want string // want "": no default AddrURL
	}{
		{"redis://127.0.0.1:6379/0", "redis://10.0.0.9:1/0"},
		{"rediss://:pw@cache:6380/2?protocol=2", "rediss://:pw@10.0.0.9:1/2?protocol=2"},
		{"redis+cluster://a:7000?addr=b:7001&addr=c:7002", "redis+cluster://10.0.0.9:1?addr=10.0.0.9%3A1&addr=10.0.0.9%3A1"},
		{"memcached://h1:11211,h2:11212", "memcached://10.0.0.9:1"},
		{"valkey://[::1]:6379", "valkey://10.0.0.9:1"},
		{"memory://conformance", ""},
		{"memory://", ""},
		{"redis://cache/0", ""},
	} {
		if firstHostPort(tt.give) == "" {
			if tt.want != "" {
				t.Errorf("%s: no host:port found, want AddrURL %s", tt.give, tt.want)
			}
			continue
		}
		if got := swapHost(tt.give, "10.0.0.9:1"); got != tt.want {
			t.Errorf("swapHost(%s) = %s, want %s", tt.give, got, tt.want)
		}
	}
}
