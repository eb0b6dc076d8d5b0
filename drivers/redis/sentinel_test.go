package redis

import (
	"crypto/tls"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/conformance"
	"github.com/fleetstore/fleetstore/internal/testing/failover"
	"github.com/fleetstore/fleetstore/internal/testing/testserver"
)

// sentinelURL is the go-redis failover URL of s: the first Sentinel as
// the host, the others as addr=.
func sentinelURL(s *testserver.Sentinel) string {
	addrs := s.Addrs()
	raw := "redis://" + addrs[0] + "?master_name=" + s.MasterName
	for _, a := range addrs[1:] {
		raw += "&addr=" + a
	}
	return raw
}

// TestParseSentinelURL: master_name makes a failover client of go-redis's
// ParseFailoverURL form, with the contract's settings forced as for a
// single server, the userinfo as the master's credentials, and each TLS
// server verified under its own name.
func TestParseSentinelURL(t *testing.T) {
	t.Parallel()
	o, err := parseURL(config(t, "redis://u:pw@s1:26379/2?master_name=mymaster&addr=s2:26379&addr=s3:26380&dial_timeout=50ms&pool_size=4"))
	if err != nil {
		t.Fatal(err)
	}
	fo := o.failover
	if fo == nil || o.single != nil || o.cluster != nil {
		t.Fatalf("got %+v, want a failover client only", o)
	}
	if fo.MasterName != "mymaster" || strings.Join(fo.SentinelAddrs, ",") != "s1:26379,s2:26379,s3:26380" || fo.DB != 2 || fo.PoolSize != 4 {
		t.Errorf("go-redis parameters lost: %+v", fo)
	}
	if fo.Username != "u" || fo.Password != "pw" || fo.SentinelUsername != "" || fo.SentinelPassword != "" {
		t.Errorf("credentials: master %q/%q, sentinel %q/%q: want the userinfo as the master's", fo.Username, fo.Password, fo.SentinelUsername, fo.SentinelPassword)
	}
	if !fo.ContextTimeoutEnabled || fo.MaxRetries != -1 || fo.DialerRetries != 1 || fo.MinIdleConns != 0 ||
		fo.DialTimeout != 50*time.Millisecond || fo.ReadTimeout != 100*time.Millisecond || fo.WriteTimeout != 100*time.Millisecond ||
		fo.PoolTimeout != 100*time.Millisecond || fo.ReplicaOnly || fo.RouteByLatency || fo.RouteRandomly || fo.TLSConfig != nil {
		t.Errorf("contract settings not forced: %+v", fo)
	}
	if strings.Contains(o.display, "pw") {
		t.Errorf("display %q shows the password", o.display)
	}

	certs := testserver.NewCerts(t)
	o, err = parseURL(config(t, "rediss://s1:26379?master_name=m&"+tlsQuery(certs.CAFile, certs.ClientCertFile, certs.ClientKeyFile)))
	if err != nil {
		t.Fatal(err)
	}
	if tc := o.failover.TLSConfig; tc == nil || tc.ServerName != "" || tc.RootCAs == nil || len(tc.Certificates) != 1 {
		t.Errorf("rediss failover TLS: %+v: want the CA and the client certificate, no fixed server name", tc)
	}
	for _, raw := range []string{
		"rediss://h:1/0?" + tlsQuery(certs.CAFile, certs.ClientCertFile, certs.ClientKeyFile),
		"rediss://h:1?addr=h:2&" + tlsQuery(certs.CAFile, certs.ClientCertFile, certs.ClientKeyFile),
	} {
		o, err := parseURL(config(t, raw))
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		var tc *tls.Config
		if o.single != nil {
			tc = o.single.TLSConfig
		} else {
			tc = o.cluster.TLSConfig
		}
		if tc.RootCAs == nil || len(tc.Certificates) != 1 {
			t.Errorf("%s: TLS %+v: want the CA and the client certificate", raw, tc)
		}
	}
}

func TestParseSentinelURLErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ give, field string }{
		{"redis://:s3cret@s1:26379?master_name=", "master_name"},
		{"redis+cluster://:s3cret@s1:26379?master_name=m", "master_name"},
		{"redis://:s3cret@s1:26379?master_name=m&replica_only=true", "replica_only"},
		{"redis://:s3cret@s1:26379?master_name=m&use_disconnected_replicas=true", "use_disconnected_replicas"},
		{"redis://:s3cret@s1:26379?master_name=m&password=s3cret", "password"},
		{"redis://s1:26379?master_name=m&username=u", "username"},
		{"redis://:s3cret@s1:26379?master_name=m&max_redirects=2", "max_redirects"},
		{"redis://:s3cret@s1:26379?master_name=m&max_retries=1", "max_retries"},
		{"redis://:s3cret@s1:26379?master_name=m&addr=nocolon", "addr"},
		{"redis://:s3cret@s1:26379?master_name=m&read_timeout=1s", "read_timeout"},
		{"redis://:s3cret@s1:26379/a/b?master_name=m", "path"},
	} {
		_, err := parseURL(config(t, tt.give))
		if !errors.Is(err, fleetstore.ErrInvalid) || !strings.Contains(err.Error(), tt.field) {
			t.Errorf("%s: got %v, want ErrInvalid naming %s", tt.give, err, tt.field)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: the error shows the password: %v", tt.give, err)
		}
	}
}

// TestConformanceSentinel runs the whole conformance suite on a
// Sentinel URL: a master, a replica and three redis-sentinel. AddrURL is
// the Sentinel form too, so T1–T4 and V4 point it at the suite's
// listeners (T3: NewFailoverClient dials nothing). The suite's lost-reply
// check proxies the Sentinel, not the master; the same check through a
// dialer that loses the master's reply follows.
func TestConformanceSentinel(t *testing.T) {
	t.Parallel()
	s := testserver.StartSentinel(t)
	conformance.Run(t, sentinelSuite(t, s, ""))
	t.Run("lost reply not re-sent", func(t *testing.T) {
		master, err := s.Master()
		if err != nil {
			t.Fatal(err)
		}
		testNoRetry(t, "redis", sentinelURL(s), master)
	})
}

// sentinelSuite is the conformance config of s, with the query
// parameters q ("name=value&…", or "") on its URLs.
func sentinelSuite(t *testing.T, s *testserver.Sentinel, q string) conformance.Config {
	master := s.Nodes[0]
	u, one := sentinelURL(s), func(addr string) string { return "redis://" + addr + "?master_name=" + s.MasterName }
	if q != "" {
		u, one = withQuery(u, q), func(addr string) string { return "redis://" + addr + "?master_name=" + s.MasterName + "&" + q }
	}
	return conformance.Config{
		URL:          u,
		AddrURL:      one,
		Records:      records(adminClient(t, "", master.Addr)),
		FlushScripts: master.FlushScripts,
	}
}

// TestSentinelFailover: under load, SENTINEL FAILOVER: calls fail within
// their budget (ErrTimeout or ErrUnavailable) and reach the new master
// after the switch, on the same Store; in plain TCP and over TLS
// (sentinelFailoverTLS), side by side (each run is mostly waiting for the
// switch) and apart from the package's other tests.
func TestSentinelFailover(t *testing.T) {
	t.Run("plain", func(t *testing.T) {
		t.Parallel()
		s := testserver.StartSentinel(t)
		const budget = 100 * time.Millisecond
		st, prefix := openStore(t, sentinelURL(s), fleetstore.WithTimeout(budget))
		failover.Run(t, st, prefix, s, budget, 110*time.Millisecond)
	})
	t.Run("tls", func(t *testing.T) {
		t.Parallel()
		sentinelFailoverTLS(t)
	})
}

// sentinelFailoverTLS is TestSentinelFailover over TLS: rediss:// to
// the Sentinels and the masters, a client certificate required
// (tls-auth-clients yes), each server verified under its own address.
func sentinelFailoverTLS(t *testing.T) {
	certs := testserver.NewCerts(t)
	s := testserver.StartSentinel(t, testserver.TLS(certs, true))
	raw := "rediss" + strings.TrimPrefix(sentinelURL(s), "redis") + "&" + tlsQuery(certs.CAFile, certs.ClientCertFile, certs.ClientKeyFile)
	// 250ms: a TLS handshake under -race on a loaded 2-core machine
	// takes tens of ms, and every call before the failover must succeed.
	const budget = 250 * time.Millisecond
	st, prefix := openStore(t, raw, fleetstore.WithTimeout(budget))
	failover.Run(t, st, prefix, s, budget, 110*time.Millisecond)
}
