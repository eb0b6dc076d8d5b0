package valkey

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/fleetstore/fleetstore/conformance"
	"github.com/fleetstore/fleetstore/internal/testing/failover"
	"github.com/fleetstore/fleetstore/internal/testing/testserver"
	"github.com/fleetstore/fleetstore/nettest"
)

// sentinelURL is the valkey-go URL of s's master: the first Sentinel as
// the host, the others as addr=, master_set.
func sentinelURL(s *testserver.Sentinel, sentinels ...string) string {
	if len(sentinels) == 0 {
		sentinels = s.Addrs()
	}
	raw := "valkey://" + sentinels[0] + "?master_set=" + s.MasterName
	for _, a := range sentinels[1:] {
		raw += "&addr=" + a
	}
	return raw
}

// startSentinel starts a master, a replica and three Sentinels of
// serverBinary and says which.
func startSentinel(t *testing.T) *testserver.Sentinel {
	t.Helper()
	s := testserver.StartSentinel(t, testserver.Binary(serverBinary))
	t.Logf("sentinel: %s master %s, replica %s, sentinels %v", serverBinary, s.Nodes[0].Addr, s.Nodes[1].Addr, s.Addrs())
	return s
}

// TestOptionsSentinel: master_set makes valkey-go's Sentinel client over
// the URL's hosts, with the contract's settings forced on the Sentinels'
// dialer too, and under valkeys:// TLS to the Sentinels as to the master,
// each server verified under its own name.
func TestOptionsSentinel(t *testing.T) {
	t.Parallel()
	o, err := parse(t, "valkey://:pw@s1:26379/2?master_set=mymaster&addr=s2:26379&addr=s3:26380&dial_timeout=50ms")
	if err != nil {
		t.Fatal(err)
	}
	co := o.client
	if co.Sentinel.MasterSet != "mymaster" || strings.Join(co.InitAddress, ",") != "s1:26379,s2:26379,s3:26380" || co.SelectDB != 2 || co.Password != "pw" {
		t.Errorf("valkey-go parameters lost: %+v", co)
	}
	if co.Dialer.Timeout != 50*time.Millisecond || co.Sentinel.Dialer.Timeout != 50*time.Millisecond || co.Sentinel.Dialer.KeepAlive <= 0 ||
		!co.DisableRetry || !co.DisableCache || co.ReplicaOnly || co.SendToReplicas != nil || co.TLSConfig != nil || co.Sentinel.TLSConfig != nil {
		t.Errorf("contract settings not forced: %+v", co)
	}
	certs := testserver.NewCerts(t)
	o, err = parse(t, "valkeys://s1:26379?master_set=m&"+tlsQuery(certs.CAFile, certs.ClientCertFile, certs.ClientKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if tc := o.client.TLSConfig; tc == nil || tc.ServerName != "" || tc.RootCAs == nil || len(tc.Certificates) != 1 {
		t.Errorf("valkeys master TLS %+v: want the CA and the client certificate, no fixed server name", tc)
	}
	if tc := o.client.Sentinel.TLSConfig; tc == nil || tc.ServerName != "" || tc.RootCAs == nil || len(tc.Certificates) != 1 {
		t.Errorf("valkeys sentinel TLS %+v: want the CA and the client certificate, no fixed server name", tc)
	}
}

// TestConformanceSentinel runs the whole conformance suite on a Sentinel
// URL: a master, a replica and three Sentinels. AddrURL is the Sentinel
// form too, so T1–T4 and V4 point it at the suite's listeners.
func TestConformanceSentinel(t *testing.T) {
	t.Parallel()
	s := startSentinel(t)
	master := s.Nodes[0]
	conformance.Run(t, conformance.Config{
		URL:          sentinelURL(s),
		AddrURL:      func(addr string) string { return "valkey://" + addr + "?master_set=" + s.MasterName },
		Records:      recordsOn([]*testserver.Redis{master}),
		FlushScripts: master.FlushScripts,
	})
}

// TestSettingSentinelDialTimeout: a Sentinel that never completes the TCP
// handshake, first in the list, costs a dial timeout, and the next one
// answers within the call's budget. Undone (valkey-go's Sentinel dialer
// has no timeout of its own), the build waits on that dial past any
// budget.
func TestSettingSentinelDialTimeout(t *testing.T) {
	s := startSentinel(t)
	raw := sentinelURL(s, append([]string{nettest.BlackHole(t)}, s.Addrs()...)...) + "&dial_timeout=100ms"
	withAndWithout(t, func(o *valkey.ClientOption) { o.Sentinel.Dialer.Timeout = 0 }, func(t *testing.T, undo func(*valkey.ClientOption)) error {
		c := testConn(t, raw, time.Second, undo)
		if err := c.Ping(budget(t, time.Second)); err != nil {
			return fmt.Errorf("ping with a black-holed first Sentinel: %w", err)
		}
		return nil
	})
}

// TestSentinelFailover: under load, SENTINEL FAILOVER: calls fail within
// their budget (ErrTimeout or ErrUnavailable) and reach the new master
// after the switch, on the same Store; in plain TCP and over TLS
// (sentinelFailoverTLS), side by side (each run is mostly waiting for the
// switch) and apart from the package's other tests.
func TestSentinelFailover(t *testing.T) {
	t.Run("plain", func(t *testing.T) {
		t.Parallel()
		s := startSentinel(t)
		// 250ms, as over TLS: every call before the failover must
		// succeed, and the first ones also load the function library on
		// a loaded 2-core machine.
		const timeout = 250 * time.Millisecond
		prefix := "vt" + randName()
		c := testConnPrefixed(t, sentinelURL(s), prefix, timeout, nil)
		failover.Run(t, c.Store, prefix, s, timeout, 110*time.Millisecond)
	})
	t.Run("tls", func(t *testing.T) {
		t.Parallel()
		sentinelFailoverTLS(t)
	})
}

// sentinelFailoverTLS is TestSentinelFailover over TLS: valkeys:// to
// the Sentinels and the masters, a client certificate required
// (tls-auth-clients yes), each server verified under its own address.
func sentinelFailoverTLS(t *testing.T) {
	certs := testserver.NewCerts(t)
	s := testserver.StartSentinel(t, testserver.Binary(serverBinary), testserver.TLS(certs, true))
	raw := "valkeys" + strings.TrimPrefix(sentinelURL(s), "valkey") + "&" + tlsQuery(certs.CAFile, certs.ClientCertFile, certs.ClientKeyFile)
	// 250ms: a TLS handshake under -race on a loaded 2-core machine
	// takes tens of ms, and every call before the failover must succeed.
	const timeout = 250 * time.Millisecond
	prefix := "vt" + randName()
	c := testConnPrefixed(t, raw, prefix, timeout, nil)
	failover.Run(t, c.Store, prefix, s, timeout, 110*time.Millisecond)
}
