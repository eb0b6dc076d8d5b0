package memcached

import (
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/driver"
)

func TestOpen(t *testing.T) {
	t.Parallel()
	tests := []struct {
		give      string
		wantHosts []string
		wantIdle  int
		wantConns int    // 0: DefaultMaxConns
		wantErr   string // a field the error names; "" for none
	}{
		{give: "memcached://h1:11211", wantHosts: []string{"h1:11211"}, wantIdle: DefaultMaxIdleConns},
		{give: "memcached://h1,h2:11300", wantHosts: []string{"h1:11211", "h2:11300"}, wantIdle: DefaultMaxIdleConns},
		{give: "memcached://[::1]:11300", wantHosts: []string{"[::1]:11300"}, wantIdle: DefaultMaxIdleConns},
		{give: "memcached://[::1]", wantHosts: []string{"[::1]:11211"}, wantIdle: DefaultMaxIdleConns},
		{give: "memcached://h1/?max_idle_conns=8", wantHosts: []string{"h1:11211"}, wantIdle: 8},
		{give: "memcached://h1?max_conns=16", wantHosts: []string{"h1:11211"}, wantIdle: 16, wantConns: 16}, // idle at most max_conns
		{give: "memcached://h1?max_conns=128", wantHosts: []string{"h1:11211"}, wantIdle: DefaultMaxIdleConns, wantConns: 128},
		{give: "memcached://h1?max_idle_conns=200", wantHosts: []string{"h1:11211"}, wantIdle: 200, wantConns: 200}, // the cap follows a larger idle setting
		{give: "memcached://h1?max_conns=4&max_idle_conns=8", wantHosts: []string{"h1:11211"}, wantIdle: 4, wantConns: 4},
		{give: "memcached://h1?max_conns=0", wantErr: "url: max_conns"},
		{give: "memcached://h1?max_conns=x", wantErr: "url: max_conns"},
		{give: "memcached://", wantErr: "url: host"},
		{give: "memcached://h1:0", wantErr: "url: host"},
		{give: "memcached://h1:99999", wantErr: "url: host"},
		{give: "memcached://h1,", wantErr: "url: host"},
		{give: "memcached://h1/db", wantErr: "url: path"},
		{give: "memcached://user:secret@h1", wantErr: "url: user"},
		{give: "memcached://h1?max_idle_conns=0", wantErr: "url: max_idle_conns"},
		{give: "memcached://h1?db=0", wantErr: "url: db"},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			u, err := url.Parse(tt.give)
			if err != nil {
				t.Fatal(err)
			}
			c, err := Driver{}.Open(driver.Config{URL: u, KeyPrefix: "p", Timeout: time.Second, Logger: zap.NewNop()})
			if tt.wantErr != "" {
				var ie *driver.InvalidError
				if !errors.As(err, &ie) || ie.Field != tt.wantErr {
					t.Fatalf("error %v, want ErrInvalid naming %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "secret") {
					t.Fatalf("error shows the password: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			cn := c.(*conn)
			if !slices.Equal(cn.sv.hosts, tt.wantHosts) || cn.pool.maxIdle != tt.wantIdle {
				t.Errorf("hosts %v, max idle %d, want %v, %d", cn.sv.hosts, cn.pool.maxIdle, tt.wantHosts, tt.wantIdle)
			}
			wantConns := tt.wantConns
			if wantConns == 0 {
				wantConns = DefaultMaxConns
			}
			if cap(cn.pool.slots) != wantConns {
				t.Errorf("max conns %d, want %d", cap(cn.pool.slots), wantConns)
			}
			c.Close()
		})
	}
}

func TestRegistered(t *testing.T) {
	if !slices.Contains(fleetstore.Drivers(), "memcached") {
		t.Fatalf("memcached not registered: %v", fleetstore.Drivers())
	}
	_, err := fleetstore.Open("memcached://h1?nope=1")
	if !errors.Is(err, fleetstore.ErrInvalid) || !strings.Contains(err.Error(), "max_idle_conns") || !strings.Contains(err.Error(), "max_conns") {
		t.Fatalf("unknown parameter: %v, want ErrInvalid listing max_conns and max_idle_conns", err)
	}
}
