package valkey

import (
	"errors"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/nettest"
)

// fakeServer is nettest's RESP server answering every script call and DEL
// with reply (V4).
func fakeServer(t *testing.T, reply string) string {
	t.Helper()
	return nettest.NewRESP(t, reply).Addr()
}

// TestMalformedReplies: a server whose handshake is fine but whose script
// replies are not what the scripts return gets an error value, never a
// panic, for every call (V4).
func TestMalformedReplies(t *testing.T) {
	for _, reply := range []string{
		":5\r\n",
		"+OK\r\n",
		"$-1\r\n",
		"*-1\r\n",
		"*0\r\n",
		"*1\r\n:9\r\n",
		"*1\r\n$2\r\nxx\r\n",
		"*2\r\n:2\r\n:7\r\n",
		"*2\r\n:2\r\n$0\r\n\r\n",
		"*2\r\n:3\r\n$1\r\nx\r\n",
		"*2\r\n:3\r\n:-5\r\n",
		"*2\r\n:4\r\n*0\r\n",
		"*3\r\n:1\r\n:1\r\n:1\r\n",
		"*2\r\n:1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n",
		"*2\r\n:7\r\n$0\r\n\r\n",
		"*2\r\n:1\r\n:1\r\n",
		"*2\r\n:0\r\n-ERR x\r\n",
		"-ERR boom\r\n",
		"%1\r\n+a\r\n:1\r\n",
		"_\r\n",
		"#t\r\n",
		",1.5\r\n",
	} {
		addr := fakeServer(t, reply)
		st, err := fleetstore.Open("valkey://"+addr, fleetstore.WithTimeout(300*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		tenant := "t"
		claim := fleetstore.Claim{Tenant: tenant, SourceID: "s", Key: "k", HookID: "h", TTL: time.Minute, PendingTTL: time.Minute}
		res, err := st.Hit(budget(t, time.Second), []fleetstore.Charge{{Kind: "hooks", Tenant: tenant, Increment: time.Millisecond, Capacity: time.Second}}, &claim)
		if !errors.Is(err, fleetstore.ErrUnavailable) {
			t.Errorf("hit, reply %q: got %v %v, want ErrUnavailable", reply, res, err)
		}
		// A settle reply of the right shape ({2, ""}) is a legitimate
		// outcome; anything else must be an error.
		if err := st.Commit(budget(t, time.Second), claim); err == nil {
			t.Errorf("commit, reply %q: no error", reply)
		}
		two := claim
		two.Tenant = "u"
		if err := st.Release(budget(t, time.Second), claim, two); err == nil {
			t.Errorf("release, reply %q: no error", reply)
		}
		if err := st.Reset(budget(t, time.Second), tenant); err != nil && !errors.Is(err, fleetstore.ErrUnavailable) {
			t.Errorf("reset, reply %q: got %v, want nil or ErrUnavailable", reply, err)
		}
		st.Close()
	}
}
