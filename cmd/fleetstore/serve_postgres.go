package main

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/drivers/postgres"
	"github.com/fleetstore/fleetstore/webhook"
)

// claimTTL is how long a stored hook's event id stays a Duplicate: the
// handlers' Config.TTL, and the TTL the postgres sink commits claims with.
const claimTTL = webhook.DefaultTTL

// hookTableDDL is the postgres sink's table, created at start when
// missing; %s is the table's name. Teams that create tables themselves
// run it with a role of their own. The sink's role then needs INSERT on
// it, and what postgres.Settler needs on the store's schema.
const hookTableDDL = `CREATE TABLE IF NOT EXISTS %s (
	hook_id  text PRIMARY KEY,
	tenant   text NOT NULL,
	provider text NOT NULL,
	event_id text NOT NULL,
	received timestamptz NOT NULL,
	deferred boolean NOT NULL,
	local    boolean NOT NULL,
	headers  jsonb NOT NULL,
	body     bytea NOT NULL
)`

// postgresSink inserts each hook as a row of its table and commits the
// hook's claim in the same transaction (postgres.Settler): a crash between
// the two leaves neither, so the provider's retry is taken, and a
// redelivery after the commit is a Duplicate. The handler's own Commit
// that follows finds the claim committed by its hook, which changes
// nothing (CONTRACT C6). A claim another hook holds is ErrClaimLost: the
// transaction rolls back and the delivery is answered 503.
//
// The table has no unique key but hook_id: an event let in twice by an
// outage (an access-log "conflict") has two rows.
type postgresSink struct {
	pool    *pgxpool.Pool
	settler *postgres.Settler
	insert  string
	node    string
}

// openPostgresSink connects to rawURL (sink.postgres.url) and creates the
// table if missing. The Settler is the store's: storeURL gives its schema
// and key_prefix.
func openPostgresSink(c *postgresSinkConfig, rawURL, storeURL, node string) (*postgresSink, error) {
	settler, err := postgres.NewSettler(storeURL)
	if err != nil {
		return nil, fmt.Errorf("store.url: %w", err)
	}
	pc, err := pgxpool.ParseConfig(rawURL)
	if err != nil {
		// pgx's error may quote the URL: it is not shown.
		return nil, errors.New("sink.postgres.url: not a URL pgx takes")
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		return nil, errors.New("sink.postgres.url: not a URL pgx takes")
	}
	table := pgx.Identifier(strings.Split(c.Table, ".")).Sanitize()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// CREATE … IF NOT EXISTS needs CREATE on the schema even when the
	// table exists: a role without it uses a table made for it.
	var exists bool
	err = pool.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", table).Scan(&exists)
	if err == nil && !exists {
		_, err = pool.Exec(ctx, fmt.Sprintf(hookTableDDL, table))
	}
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("sink.postgres.table: create %s: %w", c.Table, err)
	}
	if node == "" { // the handlers' default, webhook.Config.Node's
		node, _ = os.Hostname()
		node = node[:min(len(node), 256)]
	}
	return &postgresSink{pool: pool, settler: settler, node: node,
		insert: "INSERT INTO " + table + " (hook_id, tenant, provider, event_id, received, deferred, local, " +
			"headers, body) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"}, nil
}

// Store stores h with the claim of an endpoint without claim_body.
func (s *postgresSink) Store(ctx context.Context, h *webhook.Hook) error {
	return s.store(ctx, h, h.EventID)
}

// store inserts h and commits its claim, under key, in one transaction.
func (s *postgresSink) store(ctx context.Context, h *webhook.Hook, key string) error {
	// The quotas h is over ride in its headers, as the http sink sends
	// them: the table keeps its columns.
	stored := h.Header.Clone()
	stored.Del(overQuotaHeader) // a sender's own is not ours
	if len(h.OverQuota) > 0 {
		stored.Set(overQuotaHeader, overQuotaList(h.OverQuota))
	}
	header, err := json.Marshal(stored)
	if err != nil {
		return err
	}
	claim := fleetstore.Claim{Tenant: h.Tenant, SourceID: h.Source, Key: key, HookID: h.ID, Node: s.node,
		TTL: claimTTL}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, s.insert, h.ID, text(h.Tenant), text(h.Source), text(h.EventID),
			h.Received.UTC(), h.Deferred, h.Local, json.RawMessage(header), h.Body); err != nil {
			return err
		}
		return s.settler.Commit(ctx, tx, claim)
	})
	if err != nil {
		return fmt.Errorf("sink postgres: %w", err)
	}
	return nil
}

// text is v as PostgreSQL's text holds it: a NUL or bytes that are not
// UTF-8 become U+FFFD. The claim and the body keep the exact bytes.
func text(v string) string {
	return strings.ToValidUTF8(strings.ReplaceAll(v, "\x00", "\uFFFD"), "\uFFFD")
}

func (s *postgresSink) Close() error {
	s.pool.Close()
	return nil
}

// claimBodySink is the postgres sink of an endpoint with claim_body: its
// claims' key is the body's digest, as the handler's.
type claimBodySink struct{ *postgresSink }

func (s claimBodySink) Store(ctx context.Context, h *webhook.Hook) error {
	sum := sha256.Sum256(h.Body)
	return s.store(ctx, h, "sha256:"+base64.RawURLEncoding.EncodeToString(sum[:]))
}

// endpointSink is the sink an endpoint's handler stores to: s, or for the
// postgres sink, one committing the claim the endpoint takes.
func endpointSink(s sink, spec endpointSpec) webhook.Sink {
	if p, ok := s.(*postgresSink); ok && spec.ClaimBody {
		return claimBodySink{p}
	}
	return s
}
