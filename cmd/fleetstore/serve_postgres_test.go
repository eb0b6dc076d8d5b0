package main

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/internal/testing/testserver"
)

func adminPool(t *testing.T, srv *testserver.Postgres) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func countRows(t *testing.T, pool *pgxpool.Pool, where string, args ...any) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM fleetstore_hooks WHERE "+where,
		args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPostgresSink: the sink inserts the hook's row and commits its claim
// in one transaction: after Store alone (no Commit of the handler's), the
// event is a Duplicate; a claim held by another hook, or a table gone,
// fails Store and leaves neither the row nor a committed claim.
func TestPostgresSink(t *testing.T) {
	srv := testserver.StartPostgres(t)
	admin := adminPool(t, srv)
	storeURL := srv.URL() + "&key_prefix=serve&timeout=2s"
	ctx := context.Background()
	store, err := fleetstore.Open(storeURL)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	s, err := openPostgresSink(&postgresSinkConfig{Table: defaultHookTable}, srv.URL(), storeURL, "node-1")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	claimOf := func(key, hookID string) fleetstore.Claim {
		return fleetstore.Claim{Tenant: "acme", SourceID: "github", Key: key, HookID: hookID, TTL: claimTTL,
			PendingTTL: time.Minute}
	}
	hit := func(key, hookID string) fleetstore.Outcome {
		t.Helper()
		c := claimOf(key, hookID)
		res, err := store.Hit(ctx, nil, &c)
		if err != nil {
			t.Fatal(err)
		}
		return res.Outcome
	}

	// Stored: the row as the hook was, the claim committed.
	h := quotaHook(1)
	h.Body = []byte{0xff, 0x00, '\n', 'x'}
	h.Local = true
	if got := hit(h.EventID, h.ID); got != fleetstore.OK {
		t.Fatalf("first Hit: %v", got)
	}
	if err := s.Store(ctx, h); err != nil {
		t.Fatal(err)
	}
	if got := hit(h.EventID, "another-hook"); got != fleetstore.Duplicate {
		t.Errorf("a redelivery after Store: %v, want Duplicate (the claim committed with the row)", got)
	}
	var (
		tenant, provider, event string
		received                time.Time
		deferred, local         bool
		headers                 []byte
		body                    []byte
	)
	if err := admin.QueryRow(ctx, "SELECT tenant, provider, event_id, received, deferred, local, headers, body "+
		"FROM fleetstore_hooks WHERE hook_id = $1", h.ID).Scan(&tenant, &provider, &event, &received,
		&deferred, &local, &headers, &body); err != nil {
		t.Fatal(err)
	}
	var header http.Header
	if err := json.Unmarshal(headers, &header); err != nil {
		t.Fatal(err)
	}
	if tenant != h.Tenant || provider != h.Source || event != h.EventID || !received.Equal(h.Received.Truncate(time.Microsecond)) ||
		deferred || !local || string(body) != string(h.Body) ||
		header.Get("X-Hub-Signature-256") != "sha256=00" || header.Get(overQuotaHeader) != "events,bytes_month" {
		t.Errorf("row: %q %q %q %v %v %v %s %q, want hook %+v", tenant, provider, event, received, deferred, local,
			headers, body, h)
	}

	// A claim another hook holds: ErrClaimLost, the row rolled back.
	h2 := testHook(2)
	if got := hit(h2.EventID, "holder"); got != fleetstore.OK {
		t.Fatalf("the holder's Hit: %v", got)
	}
	if err := s.Store(ctx, h2); !errors.Is(err, fleetstore.ErrClaimLost) {
		t.Errorf("Store of a claim another hook holds: %v, want ErrClaimLost", err)
	}
	if n := countRows(t, admin, "hook_id = $1", h2.ID); n != 0 {
		t.Errorf("rows of the hook that lost its claim: %d, want 0", n)
	}

	// claim_body: the claim committed is the body's.
	h3 := testHook(3)
	sum := sha256.Sum256(h3.Body)
	bodyKey := "sha256:" + base64.RawURLEncoding.EncodeToString(sum[:])
	if got := hit(bodyKey, h3.ID); got != fleetstore.OK {
		t.Fatalf("claim_body Hit: %v", got)
	}
	if err := endpointSink(s, endpointSpec{ClaimBody: true}).Store(ctx, h3); err != nil {
		t.Fatal(err)
	}
	if got := hit(bodyKey, "another-hook"); got != fleetstore.Duplicate {
		t.Errorf("claim_body: the same body after Store: %v, want Duplicate", got)
	}

	// The table gone: Store fails, the claim is not committed.
	h4 := testHook(4)
	if got := hit(h4.EventID, h4.ID); got != fleetstore.OK {
		t.Fatalf("Hit: %v", got)
	}
	if _, err := admin.Exec(ctx, "DROP TABLE fleetstore_hooks"); err != nil {
		t.Fatal(err)
	}
	if err := s.Store(ctx, h4); err == nil {
		t.Fatal("Store with the table dropped: nil, want an error")
	}
	if got := hit(h4.EventID, "another-hook"); got != fleetstore.Pending {
		t.Errorf("a redelivery after a failed Store: %v, want Pending (the claim not committed)", got)
	}
}

// TestServePostgresSink: serve with the postgres sink stores a delivery
// once (a redelivery is 200); with the table dropped a delivery is 503,
// nothing committed, and the provider's retry, once the table is back,
// is stored (202, not 200).
func TestServePostgresSink(t *testing.T) {
	srv := testserver.StartPostgres(t)
	admin := adminPool(t, srv)
	t.Setenv("ACME_GH", "acme-secret")
	t.Setenv("HOOKS_DB", srv.URL())
	cfg := strings.Replace(goodConfig, "  url: memory://", "  url: "+srv.URL()+"&timeout=2s\n"+
		"listen: 127.0.0.1:0\nsink: {postgres: {url: env:HOOKS_DB}}", 1)
	p := startInProcess(t, cfg)
	send := func(id string) int {
		t.Helper()
		req, err := webhooktestGitHub(p.url+"/hooks/github/acme", "acme-secret", id)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := send("event-1"); got != http.StatusAccepted {
		t.Fatalf("a delivery: %d, want 202", got)
	}
	if got := send("event-1"); got != http.StatusOK {
		t.Errorf("its redelivery: %d, want 200 (Duplicate)", got)
	}
	if n := countRows(t, admin, "event_id = 'event-1' AND tenant = 'acme' AND provider = 'github'"); n != 1 {
		t.Errorf("rows of event-1: %d, want 1", n)
	}

	ctx := context.Background()
	if _, err := admin.Exec(ctx, "DROP TABLE fleetstore_hooks"); err != nil {
		t.Fatal(err)
	}
	if got := send("event-2"); got != http.StatusServiceUnavailable {
		t.Errorf("a delivery with the table dropped: %d, want 503", got)
	}
	if _, err := admin.Exec(ctx, fmt.Sprintf(hookTableDDL, defaultHookTable)); err != nil {
		t.Fatal(err)
	}
	if got := send("event-2"); got != http.StatusAccepted {
		t.Errorf("the retry once the table is back: %d, want 202 (nothing committed before)", got)
	}
	if n := countRows(t, admin, "event_id = 'event-2'"); n != 1 {
		t.Errorf("rows of event-2: %d, want 1", n)
	}
}

// TestPostgresSinkTableMadeForIt: a role without CREATE on the schema
// opens the sink on a table made for it.
func TestPostgresSinkTableMadeForIt(t *testing.T) {
	srv := testserver.StartPostgres(t)
	admin := adminPool(t, srv)
	ctx := context.Background()
	for _, stmt := range []string{"CREATE SCHEMA app", fmt.Sprintf(hookTableDDL, "app.hooks"),
		"CREATE ROLE writer LOGIN", "GRANT USAGE ON SCHEMA app TO writer", "GRANT INSERT ON app.hooks TO writer"} {
		if _, err := admin.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	writer := strings.Replace(srv.URL(), "fleet@", "writer@", 1)
	s, err := openPostgresSink(&postgresSinkConfig{Table: "app.hooks"}, writer, srv.URL(), "")
	if err != nil {
		t.Fatalf("open as a role without CREATE: %v", err)
	}
	s.Close()
	if _, err := openPostgresSink(&postgresSinkConfig{Table: "app.other"}, writer, srv.URL(), ""); err == nil ||
		!strings.Contains(err.Error(), "sink.postgres.table") {
		t.Errorf("open on a table it cannot create: %v, want an error naming sink.postgres.table", err)
	}
}
