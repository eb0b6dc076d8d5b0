package memcached

import (
	"crypto/rand"
	"encoding/hex"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/internal/testing/testserver"
)

// startServers starts n memcached servers for t and returns their
// addresses.
func startServers(t testing.TB, n int) []string {
	t.Helper()
	addrs := make([]string, n)
	for i := range addrs {
		addrs[i] = testserver.StartMemcached(t).Addr
	}
	return addrs
}

var prefixes sync.Map // test name → key_prefix

// testPrefix is the random key_prefix of t's stores.
func testPrefix(t testing.TB) string {
	p, _ := prefixes.LoadOrStore(t.Name(), "fstest-"+randName())
	return p.(string)
}

func storeURL(t testing.TB, addrs []string) string {
	return "memcached://" + strings.Join(addrs, ",") + "?key_prefix=" + testPrefix(t)
}

// openStore opens a Store on addrs with t's key_prefix, closed at cleanup.
func openStore(t testing.TB, addrs []string, timeout time.Duration, opts ...fleetstore.Option) *fleetstore.Store {
	t.Helper()
	st, err := fleetstore.Open(storeURL(t, addrs), append([]fleetstore.Option{fleetstore.WithTimeout(timeout)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func randName() string {
	b := make([]byte, 6)
	rand.Read(b)
	return hex.EncodeToString(b)
}
