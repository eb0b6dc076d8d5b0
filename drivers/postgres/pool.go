package postgres

import (
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fleetstore/fleetstore/driver"
)

// FromPool returns a driver that opens Stores on pool, a pgx pool the
// application built and keeps (its tracer, its TLS, its credentials stay
// as they are). Hand it to fleetstore.OpenDriver with a URL that holds
// only the scheme, the common parameters and schema, schema_install and
// sweep_interval:
//
//	pool, err := pgxpool.New(ctx, "postgres://edge@db/app?connect_timeout=1")
//	store, err := fleetstore.OpenDriver(postgres.FromPool(pool),
//		"postgres://?timeout=100ms&key_prefix=edge")
//
// Open refuses, with ErrInvalid naming the setting ("pool:
// ConnectTimeout"), a pool whose connects are not bounded by the larger of
// the Store's timeout and 1s: pgxpool finishes a connect its caller gave
// up on, and Close must not wait long for it (T4). The pool's own statement_timeout is kept: set it, and
// lock_timeout, to the Store's timeout, as the driver does on its own pools,
// so that a statement whose caller gave up stops. Any query exec mode works;
// pgx's default prepares each statement once per connection (a second
// round trip on its first use). Store.Close does not close pool.
func FromPool(pool *pgxpool.Pool) driver.Driver { return poolDriver{pool} }

type poolDriver struct{ pool *pgxpool.Pool }

// Open implements driver.Driver (see FromPool).
func (d poolDriver) Open(cfg driver.Config) (driver.Conn, error) {
	if d.pool == nil {
		return nil, driver.Invalid("pool", "is nil")
	}
	if cfg.URL.Scheme != "postgres" && cfg.URL.Scheme != "postgresql" {
		return nil, driver.Invalid("url: scheme", "want postgres or postgresql")
	}
	if cfg.URL.Host != "" || cfg.URL.User != nil || (cfg.URL.Path != "" && cfg.URL.Path != "/") {
		return nil, driver.Invalid("url: host", "the pool's own: give only the scheme and parameters")
	}
	q := cfg.URL.Query()
	if err := driver.CheckParams(q, "schema", "schema_install", "sweep_interval"); err != nil {
		return nil, err
	}
	o, err := parseOptions(q, cfg.Timeout)
	if err != nil {
		return nil, err
	}
	ct := d.pool.Config().ConnConfig.ConnectTimeout
	if ct <= 0 || ct > connectTimeout(cfg.Timeout) {
		return nil, driver.Invalid("pool: ConnectTimeout", "is "+ct.String()+"; set it to at most "+
			connectTimeout(cfg.Timeout).String()+": pgxpool finishes a connect its caller gave up on")
	}
	return newConn(d.pool, false, cfg, o), nil
}
