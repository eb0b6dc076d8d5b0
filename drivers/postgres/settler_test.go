package postgres

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/internal/testing/testchild"
	"github.com/fleetstore/fleetstore/internal/testing/testserver"
)

// The child of the Settler tests: it takes a claim, begins a transaction,
// inserts the hook and commits the claim in it, says "inserted", then
// either waits to be killed (SETTLER_CHILD=kill) or commits the
// transaction and says "committed" (SETTLER_CHILD=commit).
func TestSettlerChild(t *testing.T) {
	mode, url := os.Getenv("SETTLER_CHILD"), os.Getenv("SETTLER_URL")
	if mode == "" {
		return
	}
	fail := func(err error) {
		fmt.Println("open: " + err.Error())
		os.Exit(1)
	}
	ctx := context.Background()
	store, err := fleetstore.Open(url + "&timeout=2s")
	if err != nil {
		fail(err)
	}
	pool, err := pgxpool.New(ctx, url+"&application_name=settler_child")
	if err != nil {
		fail(err)
	}
	settler, err := NewSettler(url)
	if err != nil {
		fail(err)
	}
	fmt.Println("open")
	claim := settlerClaim("hook-a")
	if res, err := store.Hit(ctx, nil, &claim); err != nil || res.Outcome != fleetstore.OK {
		fail(fmt.Errorf("hit: %v %v", res.Outcome, err))
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		fail(err)
	}
	if _, err := tx.Exec(ctx, "INSERT INTO hooks (id, body) VALUES ($1, $2)", claim.HookID, "{}"); err != nil {
		fail(err)
	}
	if err := settler.Commit(ctx, tx, claim); err != nil {
		fail(err)
	}
	fmt.Println("inserted")
	if mode == "kill" {
		select {} // killed here, between the insert and the commit
	}
	if err := tx.Commit(ctx); err != nil {
		fail(err)
	}
	fmt.Println("committed")
	select {}
}

func settlerClaim(hook string) fleetstore.Claim {
	return fleetstore.Claim{Tenant: "acme", SourceID: "stripe", Key: "evt_1", HookID: hook, Node: "edge-1",
		TTL: time.Hour, PendingTTL: 2 * time.Second}
}

// settlerServer starts a server with the application's hooks table.
func settlerServer(t *testing.T) (*testserver.Postgres, *pgxpool.Pool) {
	srv := testserver.StartPostgres(t)
	admin := adminPool(t, srv)
	if _, err := admin.Exec(context.Background(), "CREATE TABLE hooks (id text PRIMARY KEY, body text)"); err != nil {
		t.Fatal(err)
	}
	return srv, admin
}

// TestSettlerKilled: a process killed between its insert of the hook and
// the commit of the transaction in which it also committed the claim
// leaves neither: no hook row, and the claim still pending (a redelivery
// is Pending, then OK once PendingTTL has passed), never Duplicate.
func TestSettlerKilled(t *testing.T) {
	srv, admin := settlerServer(t)
	cmd, lines, _ := testchild.Start(t, "TestSettlerChild", "SETTLER_CHILD=kill", "SETTLER_URL="+srv.URL())
	if !lines.Scan() || lines.Text() != "inserted" {
		t.Fatalf("child: %q, want inserted", lines.Text())
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	ctx := context.Background()
	// The server ends the dead client's session: its transaction rolls back.
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		if err := admin.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'settler_child'").
			Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the killed child's session is still open after 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	var hooks int
	if err := admin.QueryRow(ctx, "SELECT count(*) FROM hooks").Scan(&hooks); err != nil {
		t.Fatal(err)
	}
	if hooks != 0 {
		t.Errorf("%d hook rows after the kill, want 0", hooks)
	}
	store := openStore(t, srv.URL()+"&timeout=2s")
	redelivery := settlerClaim("hook-b")
	res, err := store.Hit(ctx, nil, &redelivery)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != fleetstore.Pending && res.Outcome != fleetstore.OK {
		t.Fatalf("redelivery after the kill: %v (holder %q), want pending or ok: the claim must not be committed",
			res.Outcome, res.HookID)
	}
}

// TestSettlerCommitted: the same transaction committed stores both: the
// hook row, and the claim committed for its hook, so that a redelivery is
// a Duplicate naming it.
func TestSettlerCommitted(t *testing.T) {
	srv, admin := settlerServer(t)
	_, lines, _ := testchild.Start(t, "TestSettlerChild", "SETTLER_CHILD=commit", "SETTLER_URL="+srv.URL())
	for _, want := range []string{"inserted", "committed"} {
		if !lines.Scan() || lines.Text() != want {
			t.Fatalf("child: %q, want %s", lines.Text(), want)
		}
	}
	ctx := context.Background()
	var hooks int
	if err := admin.QueryRow(ctx, "SELECT count(*) FROM hooks WHERE id = 'hook-a'").Scan(&hooks); err != nil {
		t.Fatal(err)
	}
	if hooks != 1 {
		t.Errorf("%d hook rows after the commit, want 1", hooks)
	}
	store := openStore(t, srv.URL()+"&timeout=2s")
	redelivery := settlerClaim("hook-b")
	res, err := store.Hit(ctx, nil, &redelivery)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != fleetstore.Duplicate || res.HookID != "hook-a" {
		t.Fatalf("redelivery after the commit: %v naming %q, want duplicate naming hook-a", res.Outcome, res.HookID)
	}
}

// TestSettlerFencing: inside the application's transaction a claim held
// by another hook is ErrClaimLost naming the holder, as a ClaimError, and
// is left to its holder (C8); a release of one's own committed claim is
// ErrAlreadyCommitted (C6); a bad claim is ErrInvalid naming its field.
func TestSettlerFencing(t *testing.T) {
	srv := testserver.StartPostgres(t)
	ctx := context.Background()
	store := openStore(t, srv.URL()+"&timeout=2s")
	pool := adminPool(t, srv)
	settler, err := NewSettler(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	held := settlerClaim("hook-a")
	if res, err := store.Hit(ctx, nil, &held); err != nil || res.Outcome != fleetstore.OK {
		t.Fatalf("hit: %v %v", res.Outcome, err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	err = settler.Commit(ctx, tx, settlerClaim("hook-b"))
	var lost *fleetstore.ClaimLostError
	var ce *fleetstore.ClaimError
	if !errors.As(err, &lost) || lost.Holder != "hook-a" || !errors.As(err, &ce) || ce.Index != 0 {
		t.Fatalf("commit of a claim held by hook-a: %v, want a ClaimError with ErrClaimLost naming hook-a", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if res, err := store.Hit(ctx, nil, &held); err != nil || res.Outcome != fleetstore.OK {
		t.Fatalf("the holder's retry after the lost commit: %v %v, want ok", res.Outcome, err)
	}
	tx, err = pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if err := settler.Commit(ctx, tx, held); err != nil {
		t.Fatalf("commit by the holder: %v", err)
	}
	if err := settler.Release(ctx, tx, held); !errors.Is(err, fleetstore.ErrAlreadyCommitted) {
		t.Fatalf("release of a committed claim: %v, want ErrAlreadyCommitted", err)
	}
	bad := held
	bad.TTL = 0
	var inv *fleetstore.InvalidError
	if err := settler.Commit(ctx, tx, bad); !errors.As(err, &inv) || inv.Field != "claims[0].ttl" {
		t.Fatalf("commit without a TTL: %v, want ErrInvalid naming claims[0].ttl", err)
	}
}

func openStore(t *testing.T, url string) *fleetstore.Store {
	t.Helper()
	st, err := fleetstore.Open(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// TestSettlerRefuses: a nil transaction is ErrInvalid naming tx, not a
// panic, and so is a key_prefix or schema given twice, which the Store
// refuses too.
func TestSettlerRefuses(t *testing.T) {
	settler, err := NewSettler("postgres://edge:s3cret@127.0.0.1:1/app")
	if err != nil {
		t.Fatal(err)
	}
	var inv *fleetstore.InvalidError
	for name, settle := range map[string]func() error{
		"commit":  func() error { return settler.Commit(context.Background(), nil, settlerClaim("hook-a")) },
		"release": func() error { return settler.Release(context.Background(), nil, settlerClaim("hook-a")) },
	} {
		if err := settle(); !errors.As(err, &inv) || inv.Field != "tx" {
			t.Errorf("%s in a nil transaction: %v, want ErrInvalid naming tx", name, err)
		}
	}
	for _, q := range []string{"key_prefix=a&key_prefix=b", "schema=a&schema=b"} {
		_, err := NewSettler("postgres://edge:s3cret@127.0.0.1:1/app?" + q)
		if !errors.As(err, &inv) || !strings.HasPrefix(inv.Field, "url: ") {
			t.Errorf("NewSettler with %s: %v, want ErrInvalid naming the parameter", q, err)
		}
	}
}
