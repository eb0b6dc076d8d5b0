package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fleetstore/fleetstore/conformance"
	"github.com/fleetstore/fleetstore/internal/testing/testserver"
)

// adminPool is a pool on srv for the tests' own statements, closed when
// t ends.
func adminPool(t testing.TB, srv *testserver.Postgres) *pgxpool.Pool {
	t.Helper()
	p, err := pgxpool.New(context.Background(), srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// records lists the live records of a tenant in the default schema, for
// conformance.Config.Records: its buckets ("bucket/KIND", expiring at
// their TAT), its quota windows ("window/KIND/START", expiring at their
// end) and its claims ("claim/ID"), with their remaining time on
// the server's clock. A row past its expiry is absent to every function,
// so it is no record (CONTRACT: Records are logical records).
func records(admin *pgxpool.Pool) func(ctx context.Context, prefix, tenant string) ([]conformance.Record, error) {
	return func(ctx context.Context, prefix, tenant string) ([]conformance.Record, error) {
		rows, err := admin.Query(ctx, `
			WITH n AS (SELECT fleetstore.now_v1() AS us)
			SELECT 'bucket/' || kind, tat - n.us FROM fleetstore.buckets_v1, n
			WHERE prefix = $1 AND tenant = $2 AND tat > n.us
			UNION ALL
			SELECT 'window/' || kind || '/' || wstart, wend - n.us FROM fleetstore.windows_v1, n
			WHERE prefix = $1 AND tenant = $2 AND wend > n.us
			UNION ALL
			SELECT 'claim/' || encode(id, 'hex'), expires - n.us FROM fleetstore.claims_v1, n
			WHERE tkey = $3 AND expires > n.us`, prefix, []byte(tenant), tenantKey(prefix, tenant))
		if err != nil {
			if missingSchema(err) {
				return nil, nil
			}
			return nil, err
		}
		defer rows.Close()
		var out []conformance.Record
		for rows.Next() {
			var key string
			var us int64
			if err := rows.Scan(&key, &us); err != nil {
				return nil, err
			}
			out = append(out, conformance.Record{Key: key, TTL: time.Duration(us) * time.Microsecond})
		}
		return out, rows.Err()
	}
}
