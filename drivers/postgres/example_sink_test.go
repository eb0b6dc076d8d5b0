package postgres_test

import (
	"context"
	"log"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/drivers/postgres"
	"github.com/fleetstore/fleetstore/webhook"
)

// A webhook Sink that stores each hook and commits its claim in one
// transaction: a crash between the two leaves neither (the provider's
// retry is then taken), and a redelivery after the commit is a Duplicate.
// The handler's own Commit that follows finds the claim committed by its
// hook, which changes nothing (CONTRACT C6).
func ExampleSettler() {
	const url = "postgres://edge@db/app?key_prefix=edge"
	ctx := context.Background()
	store, err := fleetstore.Open(url)
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	pool, err := pgxpool.New(ctx, "postgres://edge@db/app")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	settler, err := postgres.NewSettler(url) // the Store's schema and key_prefix
	if err != nil {
		log.Fatal(err)
	}
	const ttl = 7 * 24 * time.Hour // the handler's Config.TTL
	sink := webhook.SinkFunc(func(ctx context.Context, h *webhook.Hook) error {
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "INSERT INTO hooks (id, tenant, source, event_id, body) VALUES ($1, $2, $3, $4, $5)",
				h.ID, h.Tenant, h.Source, h.EventID, h.Body); err != nil {
				return err
			}
			// The claim the handler took for h (without Config.ClaimBody).
			return settler.Commit(ctx, tx, fleetstore.Claim{Tenant: h.Tenant, SourceID: h.Source, Key: h.EventID,
				HookID: h.ID, TTL: ttl})
		})
	})
	handler, err := webhook.New(webhook.Config{
		Store:    store,
		Provider: webhook.Stripe(5 * time.Minute),
		Secrets:  func(string) ([]string, error) { return []string{"whsec_…"}, nil },
		Tenant: func(r *http.Request, _ []byte) (string, error) {
			return strings.TrimPrefix(r.URL.Path, "/hooks/"), nil
		},
		Sink: sink,
		TTL:  ttl,
	})
	if err != nil {
		log.Fatal(err)
	}
	http.Handle("/hooks/", handler)
}
