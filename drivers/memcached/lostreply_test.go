package memcached

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/nettest"
)

// newLossyProxy forwards connections to a server and passes the server's
// replies through only until the first "END\r\n" (the end of a gets):
// later replies are lost after the server acted on their requests.
func newLossyProxy(t *testing.T, target string) *nettest.Proxy {
	return nettest.NewProxy(t, target, func() nettest.ReplyFilter {
		var seen []byte
		passing := true
		return func(chunk []byte) ([]byte, bool) {
			if !passing {
				return nil, false
			}
			seen = append(seen, chunk...)
			if i := bytes.Index(seen, []byte("END\r\n")); i >= 0 {
				passing = false
				return chunk[:len(chunk)-(len(seen)-i-5)], false
			}
			return chunk, false
		}
	})
}

// TestLostWriteReply loses the replies to a Hit's writes: they reach the
// server, their replies do not. The Hit fails with ErrTimeout and the
// write is not re-sent (T5): a charge-only hit is charged exactly once; a
// hit with a claim took the claim (whose reply was lost first, so the
// bucket was never charged), and the same hook's retry is OK and charges
// nothing.
func TestLostWriteReply(t *testing.T) {
	t.Parallel()
	srv := startServers(t, 1)
	st := openStore(t, srv, 5*time.Second)
	ctx := context.Background()
	lossyHit := func(charges []fleetstore.Charge, cl *fleetstore.Claim) error {
		p := newLossyProxy(t, srv[0]) // a fresh one: it passes one gets reply
		// The budget is wide so that the writes reach the server on a
		// loaded machine: only their replies are to be lost.
		lossy, err := fleetstore.Open("memcached://"+p.Addr()+"?key_prefix="+testPrefix(t),
			fleetstore.WithTimeout(1500*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		defer lossy.Close()
		_, err = lossy.Hit(ctx, charges, cl)
		return err
	}
	unitsLeft := func(c fleetstore.Charge, n int) int {
		left := 0
		for range n {
			res, err := st.Hit(ctx, []fleetstore.Charge{c}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome == fleetstore.OK {
				left++
			}
		}
		return left
	}

	tenant := "tenant-lost-" + randName()
	c := fleetstore.Charge{Kind: fleetstore.Hooks, Tenant: tenant, Increment: time.Hour, Capacity: 3 * time.Hour}
	if err := lossyHit([]fleetstore.Charge{c}, nil); !errors.Is(err, fleetstore.ErrTimeout) {
		t.Fatalf("charge whose reply was lost: %v, want ErrTimeout", err)
	}
	if left := unitsLeft(c, 3); left != 2 {
		t.Errorf("%d of 3 units left after a charge whose reply was lost, want 2 (charged once)", left)
	}

	tenant = "tenant-lost-" + randName()
	c.Tenant = tenant
	cl := fleetstore.Claim{Tenant: tenant, SourceID: "s", Key: "k", HookID: "hook-a", TTL: time.Hour, PendingTTL: time.Hour}
	if err := lossyHit([]fleetstore.Charge{c}, &cl); !errors.Is(err, fleetstore.ErrTimeout) {
		t.Fatalf("hit whose write replies were lost: %v, want ErrTimeout", err)
	}
	if res, err := st.Hit(ctx, []fleetstore.Charge{c}, &cl); err != nil || res.Outcome != fleetstore.OK {
		t.Fatalf("retry by the same hook: %v, %v, want OK", res, err)
	}
	if left := unitsLeft(c, 3); left != 3 {
		t.Errorf("%d of 3 units left after a lost hit and its retry, want 3 (the claim add's reply was lost: no cas was sent)", left)
	}
}
