package postgres

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/internal/testing/testserver"
)

// TestOpenRefuses: bad URL parameters are ErrInvalid naming the
// parameter, and no error quotes the password.
func TestOpenRefuses(t *testing.T) {
	for _, tc := range []struct{ query, field string }{
		{"nope=1", "url: nope"},
		{"pool_min_conns=2", "url: pool_min_conns"},
		{"schema=Bad-Name", "url: schema"},
		{"schema_install=maybe", "url: schema_install"},
		{"sweep_interval=1ms", "url: sweep_interval"},
		{"connect_timeout=5", "url: connect_timeout"},
		{"tls_cert_file=/x.pem", "url: tls_cert_file"},
		{"tls_ca_file=/does/not/exist.pem", "url"},
		{"pool_max_conns=0", "url: pool_max_conns"},
		{"pool_max_conns=abc", "url: pool_max_conns"},
		{"pool_max_conn_lifetime=xyz", "url: pool_max_conn_lifetime"},
		{"pool_max_conn_idle_time=-1s", "url: pool_max_conn_idle_time"},
		{"pool_health_check_period=0s", "url: pool_health_check_period"},
		{"pool_health_check_period=-1s", "url: pool_health_check_period"},
		{"synchronous_commit=bogus", "url: synchronous_commit"},
		{"target_session_attrs=nope", "url: target_session_attrs"},
	} {
		_, err := fleetstore.Open("postgres://edge:s3cret@127.0.0.1:1/app?" + tc.query)
		var inv *fleetstore.InvalidError
		if !errors.As(err, &inv) || inv.Field != tc.field {
			t.Errorf("%s: %v, want ErrInvalid naming %q", tc.query, err, tc.field)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: the error quotes the password: %v", tc.query, err)
		}
	}
}

// TestSchemaInstallOff: with schema_install=off a Store installs nothing:
// its calls fail until SchemaSQL has been run (the migration path), then
// succeed without reopening it.
func TestSchemaInstallOff(t *testing.T) {
	srv := testserver.StartPostgres(t)
	ctx := context.Background()
	st := openStore(t, srv.URL()+"&timeout=2s&schema=edge_state&schema_install=off")
	claim := settlerClaim("hook-a")
	if _, err := st.Hit(ctx, nil, &claim); !errors.Is(err, fleetstore.ErrUnavailable) {
		t.Fatalf("hit with no schema and schema_install=off: %v, want ErrUnavailable", err)
	}
	admin := adminPool(t, srv)
	if _, err := admin.Exec(ctx, SchemaSQL("edge_state")); err != nil {
		t.Fatalf("SchemaSQL: %v", err)
	}
	if _, err := admin.Exec(ctx, SchemaSQL("edge_state")); err != nil {
		t.Fatalf("SchemaSQL run twice: %v", err)
	}
	if res, err := st.Hit(ctx, nil, &claim); err != nil || res.Outcome != fleetstore.OK {
		t.Fatalf("hit after SchemaSQL: %v %v, want ok", res.Outcome, err)
	}
}

// TestFromPool: a Store on the application's own pool works, refuses a
// pool whose connects are unbounded, and leaves the pool open at Close.
func TestFromPool(t *testing.T) {
	srv := testserver.StartPostgres(t)
	ctx := context.Background()
	unbounded, err := pgxpool.New(ctx, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer unbounded.Close()
	var inv *fleetstore.InvalidError
	if _, err := fleetstore.OpenDriver(FromPool(unbounded), "postgres://"); !errors.As(err, &inv) ||
		inv.Field != "pool: ConnectTimeout" {
		t.Fatalf("pool without a connect timeout: %v, want ErrInvalid naming pool: ConnectTimeout", err)
	}
	pool, err := pgxpool.New(ctx, srv.URL()+"&connect_timeout=1")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := fleetstore.OpenDriver(FromPool(pool), srv.URL()); !errors.As(err, &inv) || inv.Field != "url: host" {
		t.Fatalf("a host beside the pool: %v, want ErrInvalid naming url: host", err)
	}
	st, err := fleetstore.OpenDriver(FromPool(pool), "postgres://?timeout=2s&key_prefix=own")
	if err != nil {
		t.Fatal(err)
	}
	claim := settlerClaim("hook-a")
	if res, err := st.Hit(ctx, nil, &claim); err != nil || res.Outcome != fleetstore.OK {
		t.Fatalf("hit: %v %v", res.Outcome, err)
	}
	if err := st.Commit(ctx, claim); err != nil {
		t.Fatal(err)
	}
	st.Close()
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		t.Fatalf("the pool after Store.Close: %v, want open", err)
	}
}
