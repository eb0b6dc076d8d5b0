package redis

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/logging"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/internal/testserver"
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

// TestOutageDoesNotPrint: an outage (the server killed, then a refused
// address) makes go-redis log nothing for the driver's own clients, where
// it used to write a "failed to dial" line to stderr per failed dial. The
// test records go-redis's process-wide logger (what its default prints to
// stderr) and counts the lines about the dead addresses, so other tests'
// clients do not count. Not parallel: it swaps the process-wide logger.
func TestOutageDoesNotPrint(t *testing.T) {
	rec := &goRedisLines{}
	goredis.SetLogger(rec)
	t.Cleanup(logging.Enable) // go-redis's default again: stderr

	srv := testserver.StartRedis(t)
	refused := nettest.RefusedAddr(t)
	for _, raw := range []string{srv.URL() + "/0", "redis://" + refused, "redis+cluster://" + refused} {
		st, _ := openStore(t, raw+"?timeout=200ms")
		if raw == srv.URL()+"/0" {
			mustHit(t, st, []fleetstore.Charge{hooks("t")}, nil, fleetstore.OK)
			srv.Stop()
		}
		for range 30 {
			if _, err := st.Hit(ctx(t), []fleetstore.Charge{hooks("t")}, nil); err == nil {
				t.Fatalf("%s: hit during the outage: no error", raw)
			}
			wantErrIs(t, raw+": ping", st.Ping(ctx(t)), fleetstore.ErrUnavailable)
		}
	}
	for _, addr := range []string{srv.Addr, refused} {
		if got := rec.about(addr); len(got) > 0 {
			t.Errorf("go-redis logged %d lines about %s, want none; first: %s", len(got), addr, got[0])
		}
	}
}
