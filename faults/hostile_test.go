package faults

import (
	"context"
	"errors"
	"net"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/nettest"
)

// hostile is a server that lies: what it answers, and to what.
type hostile struct {
	name string
	// start returns the address of a server sending the hostile reply.
	start func(t *testing.T) string
}

// stream is a server that answers the first read with head, then writes
// body forever (until the client hangs up): an endless line or reply.
func stream(t *testing.T, head, body string) string {
	return nettest.NewServer(t, func(c net.Conn) {
		buf := make([]byte, 4096)
		if _, err := c.Read(buf); err != nil {
			return
		}
		writeForever(c, head, body)
	}).Addr()
}

// respStream is stream behind a RESP handshake: HELLO refused, then head
// and body forever in answer to the first data command.
func respStream(t *testing.T, head, body string) string {
	return nettest.NewServer(t, func(c net.Conn) {
		buf := make([]byte, 64<<10)
		for {
			n, err := c.Read(buf)
			if err != nil {
				return
			}
			req := string(buf[:n])
			if strings.Contains(strings.ToUpper(req), "HELLO") {
				_, _ = c.Write([]byte("-ERR unknown command 'HELLO'\r\n"))
				continue
			}
			if strings.Contains(strings.ToUpper(req), "CLUSTER") {
				_, _ = c.Write([]byte("-ERR This instance has cluster support disabled\r\n"))
				continue
			}
			break
		}
		writeForever(c, head, body)
	}).Addr()
}

// writeForever writes head, then body again and again until the client
// hangs up.
func writeForever(c net.Conn, head, body string) {
	if _, err := c.Write([]byte(head)); err != nil {
		return
	}
	chunk := []byte(strings.Repeat(body, max(1, 64<<10/len(body))))
	for {
		if _, err := c.Write(chunk); err != nil {
			return
		}
	}
}

func respHostile() []hostile {
	var out []hostile
	for _, r := range []struct{ name, reply string }{
		{"huge bulk", "$2147483647\r\n"},
		{"huge array", "*2147483647\r\n"},
		{"huge map", "%1073741823\r\n"},
		{"negative bulk length", "$-5\r\n"},
		{"negative array length", "*-3\r\n"},
		{"deep nesting", strings.Repeat("*1\r\n", 200000)},
	} {
		reply := r.reply
		out = append(out,
			hostile{r.name + " as the script's reply", func(t *testing.T) string { return nettest.NewRESP(t, reply).Addr() }},
			hostile{r.name + " as the handshake's reply", func(t *testing.T) string { return nettest.NewGarbage(t, []byte(reply)).Addr() }})
	}
	return append(out,
		hostile{"endless line", func(t *testing.T) string { return respStream(t, "+", "a") }},
		hostile{"endless reply", func(t *testing.T) string { return respStream(t, "*100000\r\n", "$8\r\nyyyyyyyy\r\n") }},
	)
}

func memcachedHostile() []hostile {
	return []hostile{
		{"huge VALUE", func(t *testing.T) string { return nettest.NewGarbage(t, []byte("VALUE k 0 2147483647 1\r\n")).Addr() }},
		{"negative VALUE", func(t *testing.T) string { return nettest.NewGarbage(t, []byte("VALUE k 0 -1 1\r\n")).Addr() }},
		{"endless line", func(t *testing.T) string { return stream(t, "VALUE ", "a") }},
		{"endless get", func(t *testing.T) string { return stream(t, "", "VALUE k 0 8 1\r\nzzzzzzzz\r\n") }},
	}
}

// TestHostileReplies: a server (or anything at the configured address)
// that answers with absurd declared lengths, deep nesting or an endless
// stream never takes the process down, never makes the client allocate
// without bound, and never outlives the budget: every call fails with
// ErrUnavailable or ErrTimeout in time (CONTRACT V4, T1). Each class logs
// its time and the bytes allocated meanwhile.
func TestHostileReplies(t *testing.T) {
	const budget = 300 * time.Millisecond
	for _, d := range []struct {
		scheme  string
		classes []hostile
	}{{"redis", respHostile()}, {"valkey", respHostile()}, {"memcached", memcachedHostile()}} {
		for _, h := range d.classes {
			t.Run(d.scheme+"/"+h.name, func(t *testing.T) {
				addr := h.start(t)
				st, err := fleetstore.Open(d.scheme+"://"+addr, fleetstore.WithTimeout(budget))
				if err != nil {
					t.Fatal(err)
				}
				defer st.Close()
				var peak atomic.Uint64
				stop := sampleHeap(&peak)
				pr := startProbe()
				var before runtime.MemStats
				runtime.ReadMemStats(&before)
				start := time.Now()
				claim := fleetstore.Claim{Tenant: "t", SourceID: "s", Key: "k", HookID: "h", TTL: time.Minute, PendingTTL: time.Minute}
				_, err = st.Hit(context.Background(), []fleetstore.Charge{{Kind: fleetstore.Hooks, Tenant: "t", Increment: time.Millisecond, Capacity: time.Second}}, &claim)
				took := time.Since(start)
				slack := pr.slack(schedSlack)
				stop()
				var after runtime.MemStats
				runtime.ReadMemStats(&after)
				allocated := after.TotalAlloc - before.TotalAlloc
				t.Logf("%s %s: %v after %v, %d MiB allocated, heap peak %d MiB", d.scheme, h.name, err, took.Round(time.Millisecond),
					allocated>>20, peak.Load()>>20)
				if !errors.Is(err, fleetstore.ErrUnavailable) && !errors.Is(err, fleetstore.ErrTimeout) {
					t.Errorf("got %v, want ErrUnavailable or ErrTimeout", err)
				}
				if took > budget+10*time.Millisecond+slack {
					t.Errorf("took %v, budget %v + 10ms + slack %v", took, budget, slack)
				}
				if allocated > 256<<20 {
					t.Errorf("%d MiB allocated by one call: the client allocated what the server declared", allocated>>20)
				}
			})
		}
	}
}

// sampleHeap records the largest HeapInuse it sees until stop is called.
func sampleHeap(peak *atomic.Uint64) (stop func()) {
	done := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			if m.HeapInuse > peak.Load() {
				peak.Store(m.HeapInuse)
			}
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	return func() { close(done); <-ended }
}
