package redis

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/logging"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/internal/testing/testserver"
	"github.com/fleetstore/fleetstore/nettest"
)

// goRedisLines records what go-redis logs through its process-wide
// logger, where its default would print to stderr.
type goRedisLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *goRedisLines) Printf(_ context.Context, format string, v ...any) {
	l.mu.Lock()
	l.lines = append(l.lines, fmt.Sprintf(format, v...))
	l.mu.Unlock()
}

// about returns the lines that mention addr.
func (l *goRedisLines) about(addr string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, s := range l.lines {
		if strings.Contains(s, addr) {
			out = append(out, s)
		}
	}
	return out
}

// TestOutageDoesNotPrint: an outage (the server killed, a refused
// address, one whose dials time out) makes go-redis log nothing for the driver's own clients, where
// it used to write a "failed to dial" line to stderr per failed dial. The
// test records go-redis's process-wide logger (what its default prints to
// stderr) and counts the lines about the dead addresses, so other tests'
// clients do not count. Not parallel: it swaps the process-wide logger.
//
// A Sentinel URL is the exception, as the package doc says: go-redis's
// Sentinel code logs its failed master lookups and its pool's failed
// dials through that process-wide logger, which no client setting
// reaches. The test counts those lines (logged, and printed to stderr
// without a logger of the application's), then installs ZapLogger and
// shows the same outage's lines reach the zap logger and not go-redis's
// default.
func TestOutageDoesNotPrint(t *testing.T) {
	rec := &goRedisLines{}
	goredis.SetLogger(rec)
	t.Cleanup(logging.Enable) // go-redis's default again: stderr

	srv := testserver.StartRedis(t)
	refused, hole := nettest.RefusedAddr(t), nettest.BlackHole(t)
	for _, tc := range []struct {
		url   string
		calls int
		want  error
	}{
		{srv.URL() + "/0", 30, fleetstore.ErrUnavailable}, // killed below
		{"redis://" + refused, 30, fleetstore.ErrUnavailable},
		{"redis+cluster://" + refused, 30, fleetstore.ErrUnavailable},
		{"redis://" + hole, 5, fleetstore.ErrTimeout}, // each dial times out
	} {
		st, err := fleetstore.Open(tc.url+"?timeout=200ms&key_prefix=fstest-"+randHex(6), fleetstore.WithTimeout(200*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		if tc.url == srv.URL()+"/0" {
			mustHit(t, st, []fleetstore.Charge{hooks("t")}, nil, fleetstore.OK)
			srv.Stop()
		}
		for range tc.calls {
			if _, err := st.Hit(ctx(t), []fleetstore.Charge{hooks("t")}, nil); err == nil {
				t.Fatalf("%s: hit during the outage: no error", tc.url)
			}
			wantErrIs(t, tc.url+": ping", st.Ping(ctx(t)), tc.want)
		}
		st.Close()
	}
	for _, addr := range []string{srv.Addr, refused, hole} {
		if got := rec.about(addr); len(got) > 0 {
			t.Errorf("go-redis logged %d lines about %s, want none; first: %s", len(got), addr, got[0])
		}
	}
	// A Sentinel URL whose Sentinels refuse: go-redis logs, the driver
	// cannot stop it.
	sentinel := nettest.RefusedAddr(t)
	sentinelOutage := func() {
		st, err := fleetstore.Open("redis://"+sentinel+"?master_name=mymaster&timeout=200ms&key_prefix=fstest-"+randHex(6), fleetstore.WithTimeout(200*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		for range 10 {
			if _, err := st.Hit(ctx(t), []fleetstore.Charge{hooks("t")}, nil); err == nil {
				t.Fatal("sentinel outage: hit: no error")
			}
		}
	}
	sentinelOutage()
	logged := len(rec.about(sentinel))
	t.Logf("go-redis's process-wide logger: %d lines about the refused Sentinel in 10 calls", logged)
	if logged == 0 {
		t.Errorf("go-redis logged nothing about a refused Sentinel: the package doc and ZapLogger's say it does; update them")
	}

	// The application installs ZapLogger: the lines go to its zap logger.
	core, zapped := observer.New(zap.WarnLevel)
	goredis.SetLogger(ZapLogger(zap.New(core)))
	before := len(rec.about(sentinel))
	sentinelOutage()
	if got := len(rec.about(sentinel)) - before; got != 0 {
		t.Errorf("with ZapLogger installed, go-redis's old logger got %d more lines, want 0", got)
	}
	var n int
	for _, e := range zapped.FilterMessage("go-redis").All() {
		if strings.Contains(e.ContextMap()["line"].(string), sentinel) {
			n++
		}
	}
	if n == 0 {
		t.Errorf("with ZapLogger installed, the zap logger got no line about the refused Sentinel; got %d entries", zapped.Len())
	}
	t.Logf("ZapLogger: %d lines about the refused Sentinel in 10 calls", n)
}
