// Package tlstest checks a driver's TLS settings, the same way for every
// driver: against a real server that requires a client certificate,
// which client settings connect and which fail closed, and which URLs
// are refused at Open.
package tlstest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/internal/testing/testserver"
)

// Clients runs a Hit with a charge and a claim for each of
// certs.Clients(), on a Store opened on storeURL(query) with a random
// key_prefix and the budget: the settings that should connect answer OK;
// the others fail closed, with ErrUnavailable within the budget and
// nothing written (records reports how many records a key_prefix holds
// on the server, read over a plain connection).
func Clients(t *testing.T, certs *testserver.Certs, budget time.Duration,
	storeURL func(query string) string, records func(prefix string) (int, error)) {
	t.Helper()
	for _, c := range certs.Clients() {
		t.Run(c.Name, func(t *testing.T) {
			prefix := "fstls-" + randHex()
			st, err := fleetstore.Open(storeURL(c.Query)+"&key_prefix="+prefix,
				fleetstore.WithTimeout(budget))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			tenant := "tls-" + randHex()
			claim := fleetstore.Claim{Tenant: tenant, SourceID: "s", Key: "k", HookID: "h",
				TTL: time.Minute, PendingTTL: time.Minute}
			charge := fleetstore.Charge{Kind: fleetstore.Hooks, Tenant: tenant, Increment: time.Second,
				Capacity: time.Minute}
			start := time.Now()
			res, err := st.Hit(context.Background(), []fleetstore.Charge{charge}, &claim)
			took := time.Since(start)
			if c.OK {
				if err != nil || res.Outcome != fleetstore.OK {
					t.Fatalf("hit: %+v %v, want OK", res, err)
				}
				return
			}
			if !errors.Is(err, fleetstore.ErrUnavailable) {
				t.Fatalf("hit: %+v %v, want ErrUnavailable (fail closed)", res, err)
			}
			t.Logf("fails closed in %v: %v", took, err)
			if took > budget {
				t.Errorf("hit took %v, budget %v", took, budget)
			}
			n, err := records(prefix)
			if err != nil {
				t.Fatal(err)
			}
			if n != 0 {
				t.Errorf("a refused TLS connection wrote %d records", n)
			}
		})
	}
}

// Password is the password the URLs given to OpenErrors may hold: no
// error may show it.
const Password = "s3cret"

// OpenErrors checks that Open of each URL (URL → the parameter its
// error must name) is ErrInvalid naming "url: PARAMETER", without
// Password.
func OpenErrors(t *testing.T, urls map[string]string) {
	t.Helper()
	for raw, param := range urls {
		_, err := fleetstore.Open(raw)
		var ie *fleetstore.InvalidError
		if !errors.As(err, &ie) || ie.Field != "url: "+param {
			t.Errorf("%s: got %v, want ErrInvalid naming url: %s", raw, err, param)
			continue
		}
		if strings.Contains(err.Error(), Password) {
			t.Errorf("%s: the error shows the password: %v", raw, err)
		}
	}
}

func randHex() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
