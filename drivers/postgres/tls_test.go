package postgres

import (
	"errors"
	"testing"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/internal/testing/testserver"
)

// TestTLS: tls_ca_file verifies the server (sslmode verify-full by
// default); a server whose certificate another CA signed fails every call
// with ErrUnavailable (fail closed), and a missing file is ErrInvalid at
// Open.
func TestTLS(t *testing.T) {
	certs := testserver.NewCerts(t)
	srv := testserver.StartPostgresTLS(t, certs)
	base := "postgres://fleet@" + srv.Addr + "/postgres?timeout=2s&tls_ca_file="
	st := openStore(t, base+certs.CAFile)
	if res, err := hitOnce(st, "tls"); err != nil || res.Outcome != fleetstore.OK {
		t.Fatalf("hit over TLS: %v %v", res.Outcome, err)
	}
	wrong := openStore(t, base+certs.OtherCAFile)
	if _, err := hitOnce(wrong, "tls-wrong"); !errors.Is(err, fleetstore.ErrUnavailable) {
		t.Fatalf("hit with the wrong CA: %v, want ErrUnavailable", err)
	}
	var inv *fleetstore.InvalidError
	if _, err := fleetstore.Open(base + "/nonexistent.pem"); !errors.As(err, &inv) {
		t.Fatalf("a missing tls_ca_file: %v, want ErrInvalid", err)
	}
}
