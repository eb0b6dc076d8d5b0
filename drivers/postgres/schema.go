package postgres

import (
	"context"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// SchemaSQL returns the SQL that installs the driver's tables and
// functions in schema (a PostgreSQL identifier; "fleetstore" by default),
// for a team that installs schemas itself: run it once, with a role that
// may create in the database, before the Stores start, and open them
// with schema_install=off. It is idempotent (IF NOT EXISTS, OR REPLACE).
// The Stores' role then needs USAGE on the schema, SELECT, INSERT, UPDATE
// and DELETE on its tables and EXECUTE on its functions (the defaults
// when the same role installed them).
func SchemaSQL(schema string) string {
	s := pgx.Identifier{schema}.Sanitize()
	return strings.ReplaceAll(schemaTemplate, "{S}", s)
}

// schemaTemplate is the schema, "{S}" standing for the schema's quoted name.
//
// buckets_v1 holds one row per (key_prefix, tenant, kind): its TAT, in µs
// of the server's clock. A bucket expires at its TAT (a bucket whose TAT has
// passed is a full bucket, CONTRACT §3), so the TAT is its expiry.
// claims_v1 holds one row per claim, keyed by the SHA-256 of (key_prefix,
// tenant, source_id, key): three 1 KiB parts exceed a btree index row. tkey
// is the 64-bit key of (key_prefix, tenant), the Hit's advisory lock and
// the tests' way to list a tenant's claims. windows_v1 holds one row per
// (key_prefix, tenant, kind, window start) of a calendar quota (CONTRACT
// §3.2): the units used in [wstart, wend), µs of the server's clock; it
// expires at wend. A row past its expiry is absent to every function;
// sweep_v2 deletes such rows.
//
// The functions carry the version of their arguments and answers: hit_v2
// and peek_v2 take window charges, sweep_v2 sweeps windows_v1 too. A
// schema installed by an earlier driver has hit_v1 and sweep_v1 and no
// windows_v1: install finds sweep_v2 missing and runs this SQL, which adds
// what is missing and leaves hit_v1 and sweep_v1 to the Stores of the
// earlier version during a rolling upgrade.
const schemaTemplate = `
CREATE SCHEMA IF NOT EXISTS {S};
CREATE TABLE IF NOT EXISTS {S}.buckets_v1 (
	prefix text NOT NULL,
	tenant bytea NOT NULL,
	kind text NOT NULL,
	tat bigint NOT NULL,
	PRIMARY KEY (prefix, tenant, kind)
) WITH (fillfactor = 70);
CREATE TABLE IF NOT EXISTS {S}.claims_v1 (
	id bytea PRIMARY KEY,
	tkey bigint NOT NULL,
	committed boolean NOT NULL,
	hook bytea NOT NULL,
	node bytea NOT NULL,
	expires bigint NOT NULL
) WITH (fillfactor = 70);
CREATE TABLE IF NOT EXISTS {S}.windows_v1 (
	prefix text NOT NULL,
	tenant bytea NOT NULL,
	kind text NOT NULL,
	wstart bigint NOT NULL,
	wend bigint NOT NULL,
	used bigint NOT NULL,
	PRIMARY KEY (prefix, tenant, kind, wstart)
) WITH (fillfactor = 70);

CREATE OR REPLACE FUNCTION {S}.now_v1() RETURNS bigint LANGUAGE sql VOLATILE
AS $f$ SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint $f$;

-- windows_v2 finds, for each charge i of a Hit or Peek, the window of a
-- window charge (p_wmax[i] > 0) that holds now_us among its three,
-- p_edges[4i-3..4i]: wst[i] and wen[i], NULL for a GCRA charge. None
-- holds it: an exception, so that nothing is written.
CREATE OR REPLACE FUNCTION {S}.windows_v2(p_wmax bigint[], p_edges bigint[], now_us bigint,
	OUT wst bigint[], OUT wen bigint[])
LANGUAGE plpgsql IMMUTABLE AS $f$
DECLARE
	i int;
	j int;
	e int;
BEGIN
	wst := '{}';
	wen := '{}';
	FOR i IN 1..coalesce(array_length(p_wmax, 1), 0) LOOP
		wst[i] := NULL;
		wen[i] := NULL;
		IF p_wmax[i] > 0 THEN
			FOR j IN 0..2 LOOP
				e := 4 * (i - 1) + j + 1;
				IF p_edges[e] <= now_us AND now_us < p_edges[e + 1] THEN
					wst[i] := p_edges[e];
					wen[i] := p_edges[e + 1];
				END IF;
			END LOOP;
			IF wst[i] IS NULL THEN
				RAISE EXCEPTION 'quota window: the store''s clock is outside the windows sent';
			END IF;
		END IF;
	END LOOP;
END
$f$;

CREATE OR REPLACE FUNCTION {S}.hit_v2(
	p_prefix text, p_tenant bytea, p_tkey bigint,
	p_kinds text[], p_incs bigint[], p_caps bigint[],
	p_wmax bigint[], p_wcost bigint[], p_edges bigint[],
	p_claim bytea, p_hook bytea, p_node bytea, p_pending bigint,
	OUT outcome int, OUT holder bytea, OUT wait bigint, OUT resets bigint[], OUT used bigint[])
LANGUAGE plpgsql AS $f$
DECLARE
	now_us bigint;
	n int := coalesce(array_length(p_kinds, 1), 0);
	tats bigint[];
	counts bigint[];
	news bigint[] := '{}';
	wst bigint[];
	wen bigint[];
	buckets boolean := false;
	windows boolean := false;
	c {S}.claims_v1%ROWTYPE;
	live boolean := false;
	i int;
BEGIN
	PERFORM pg_advisory_xact_lock(p_tkey);
	now_us := {S}.now_v1();
	FOR i IN 1..n LOOP
		IF p_wmax[i] > 0 THEN windows := true; ELSE buckets := true; END IF;
	END LOOP;
	IF windows THEN
		SELECT w.wst, w.wen INTO wst, wen FROM {S}.windows_v2(p_wmax, p_edges, now_us) w;
	ELSE
		wst := array_fill(NULL::bigint, ARRAY[n]);
		wen := wst;
	END IF;
	tats := array_fill(0::bigint, ARRAY[n]);
	counts := array_fill(0::bigint, ARRAY[n]);
	IF buckets THEN
		SELECT array_agg(coalesce(b.tat, 0) ORDER BY k.ord) INTO tats
		FROM unnest(p_kinds) WITH ORDINALITY AS k(kind, ord)
		LEFT JOIN {S}.buckets_v1 b ON b.prefix = p_prefix AND b.tenant = p_tenant AND b.kind = k.kind;
	END IF;
	IF windows THEN
		SELECT array_agg(coalesce(w.used, 0) ORDER BY k.ord) INTO counts
		FROM unnest(p_kinds, wst) WITH ORDINALITY AS k(kind, st, ord)
		LEFT JOIN {S}.windows_v1 w ON w.prefix = p_prefix AND w.tenant = p_tenant AND w.kind = k.kind
			AND w.wstart = k.st AND w.wend > now_us;
	END IF;
	resets := '{}';
	used := '{}';
	FOR i IN 1..n LOOP
		IF wst[i] IS NULL THEN
			resets[i] := greatest(tats[i] - now_us, 0);
			used[i] := 0;
		ELSE
			resets[i] := wen[i] - now_us;
			used[i] := counts[i];
		END IF;
	END LOOP;
	wait := 0;
	IF p_claim IS NOT NULL THEN
		SELECT * INTO c FROM {S}.claims_v1 WHERE id = p_claim AND expires > now_us;
		live := FOUND;
		IF live AND NOT c.committed AND c.hook = p_hook THEN
			outcome := 1; -- C2: its own retry, before the charges
			RETURN;
		END IF;
	END IF;
	FOR i IN 1..n LOOP
		IF wst[i] IS NULL THEN
			news[i] := greatest(tats[i], now_us) + p_incs[i];
			IF news[i] - p_caps[i] > now_us THEN
				wait := greatest(wait, news[i] - p_caps[i] - now_us);
			END IF;
		ELSE
			news[i] := counts[i] + p_wcost[i];
			IF news[i] > p_wmax[i] THEN
				wait := greatest(wait, wen[i] - now_us);
			END IF;
		END IF;
	END LOOP;
	IF wait > 0 THEN
		outcome := 4; -- G3: nothing taken
		RETURN;
	END IF;
	IF p_claim IS NOT NULL THEN
		IF NOT live THEN
			INSERT INTO {S}.claims_v1 AS x
			VALUES (p_claim, p_tkey, false, p_hook, coalesce(p_node, ''), now_us + p_pending)
			ON CONFLICT (id) DO UPDATE SET tkey = excluded.tkey, committed = false,
				hook = excluded.hook, node = excluded.node, expires = excluded.expires
			WHERE x.expires <= now_us;
			IF NOT FOUND THEN -- a settle wrote it since it was read
				SELECT * INTO c FROM {S}.claims_v1 WHERE id = p_claim;
				live := true;
			END IF;
		END IF;
		IF live THEN
			IF c.committed THEN
				outcome := 2; holder := c.hook;
			ELSE
				outcome := 3; wait := greatest(coalesce(c.expires - now_us, 1), 1);
			END IF;
			RETURN;
		END IF;
	END IF;
	IF buckets THEN
		INSERT INTO {S}.buckets_v1 AS b (prefix, tenant, kind, tat)
		SELECT p_prefix, p_tenant, u.k, u.v FROM unnest(p_kinds, news, wst) AS u(k, v, st)
		WHERE u.st IS NULL
		ON CONFLICT (prefix, tenant, kind) DO UPDATE SET tat = excluded.tat;
	END IF;
	IF windows THEN
		INSERT INTO {S}.windows_v1 AS w (prefix, tenant, kind, wstart, wend, used)
		SELECT p_prefix, p_tenant, u.k, u.st, u.en, u.v FROM unnest(p_kinds, news, wst, wen) AS u(k, v, st, en)
		WHERE u.st IS NOT NULL
		ON CONFLICT (prefix, tenant, kind, wstart) DO UPDATE SET wend = excluded.wend, used = excluded.used;
	END IF;
	FOR i IN 1..n LOOP
		IF wst[i] IS NULL THEN
			resets[i] := news[i] - now_us;
		ELSE
			used[i] := news[i];
		END IF;
	END LOOP;
	outcome := 1;
END
$f$;

CREATE OR REPLACE FUNCTION {S}.peek_v2(
	p_prefix text, p_tenant bytea, p_kinds text[], p_wmax bigint[], p_edges bigint[],
	OUT resets bigint[], OUT used bigint[])
LANGUAGE plpgsql AS $f$
DECLARE
	now_us bigint := {S}.now_v1();
	wst bigint[];
	wen bigint[];
	tats bigint[];
	counts bigint[];
	i int;
BEGIN
	SELECT w.wst, w.wen INTO wst, wen FROM {S}.windows_v2(p_wmax, p_edges, now_us) w;
	SELECT coalesce(array_agg(coalesce(b.tat, 0) ORDER BY k.ord), '{}'),
		coalesce(array_agg(coalesce(w.used, 0) ORDER BY k.ord), '{}') INTO tats, counts
	FROM unnest(p_kinds, wst) WITH ORDINALITY AS k(kind, st, ord)
	LEFT JOIN {S}.buckets_v1 b ON k.st IS NULL AND b.prefix = p_prefix AND b.tenant = p_tenant AND b.kind = k.kind
	LEFT JOIN {S}.windows_v1 w ON w.prefix = p_prefix AND w.tenant = p_tenant AND w.kind = k.kind
		AND w.wstart = k.st AND w.wend > now_us;
	resets := '{}';
	used := '{}';
	FOR i IN 1..coalesce(array_length(p_kinds, 1), 0) LOOP
		IF wst[i] IS NULL THEN
			resets[i] := greatest(tats[i] - now_us, 0);
			used[i] := 0;
		ELSE
			resets[i] := wen[i] - now_us;
			used[i] := counts[i];
		END IF;
	END LOOP;
END
$f$;

CREATE OR REPLACE FUNCTION {S}.settle_v1(
	p_commit boolean[], p_ids bytea[], p_tkeys bigint[], p_hooks bytea[], p_nodes bytea[],
	p_ttls bigint[], OUT codes int[], OUT holders bytea[])
LANGUAGE plpgsql AS $f$
DECLARE
	now_us bigint;
	c {S}.claims_v1%ROWTYPE;
	got boolean;
	i int;
BEGIN
	codes := '{}';
	holders := '{}';
	FOR i IN 1..coalesce(array_length(p_ids, 1), 0) LOOP
		codes[i] := 0;
		holders[i] := NULL;
		LOOP
			SELECT * INTO c FROM {S}.claims_v1 WHERE id = p_ids[i] FOR UPDATE;
			got := FOUND;
			now_us := {S}.now_v1();
			IF got AND c.expires > now_us THEN
				IF c.hook <> p_hooks[i] THEN
					codes[i] := 1; holders[i] := c.hook; -- C8
				ELSIF c.committed THEN
					IF NOT p_commit[i] THEN codes[i] := 2; END IF; -- C6
				ELSIF p_commit[i] THEN -- C5
					UPDATE {S}.claims_v1 SET committed = true, node = coalesce(p_nodes[i], ''),
						expires = now_us + p_ttls[i] WHERE id = p_ids[i];
				ELSE
					DELETE FROM {S}.claims_v1 WHERE id = p_ids[i];
				END IF;
				EXIT;
			ELSIF got THEN -- expired: absent (C7)
				IF p_commit[i] THEN
					UPDATE {S}.claims_v1 SET tkey = p_tkeys[i], committed = true, hook = p_hooks[i],
						node = coalesce(p_nodes[i], ''), expires = now_us + p_ttls[i] WHERE id = p_ids[i];
				ELSE
					DELETE FROM {S}.claims_v1 WHERE id = p_ids[i];
				END IF;
				EXIT;
			ELSIF NOT p_commit[i] THEN
				EXIT; -- C7: nothing to release
			END IF;
			INSERT INTO {S}.claims_v1
			VALUES (p_ids[i], p_tkeys[i], true, p_hooks[i], coalesce(p_nodes[i], ''), now_us + p_ttls[i])
			ON CONFLICT (id) DO NOTHING;
			EXIT WHEN FOUND; -- else a Hit took it meanwhile: read it again
		END LOOP;
	END LOOP;
END
$f$;

CREATE OR REPLACE FUNCTION {S}.sweep_v2(p_from bigint, p_blocks int, OUT deleted bigint, OUT next bigint)
LANGUAGE plpgsql AS $f$
DECLARE
	now_us bigint := {S}.now_v1();
	lo tid := format('(%s,0)', p_from)::tid;
	hi tid := format('(%s,0)', least(p_from + p_blocks, 4294967295))::tid;
	n bigint;
	pages bigint;
BEGIN
	deleted := 0;
	next := p_from;
	IF NOT pg_try_advisory_xact_lock(7308332115233129842) THEN
		RETURN; -- another Store sweeps
	END IF;
	DELETE FROM {S}.buckets_v1 WHERE ctid >= lo AND ctid < hi AND tat <= now_us;
	GET DIAGNOSTICS n = ROW_COUNT;
	deleted := n;
	DELETE FROM {S}.claims_v1 WHERE ctid >= lo AND ctid < hi AND expires <= now_us;
	GET DIAGNOSTICS n = ROW_COUNT;
	deleted := deleted + n;
	DELETE FROM {S}.windows_v1 WHERE ctid >= lo AND ctid < hi AND wend <= now_us;
	GET DIAGNOSTICS n = ROW_COUNT;
	deleted := deleted + n;
	pages := greatest(pg_relation_size('{S}.buckets_v1'), pg_relation_size('{S}.claims_v1'),
		pg_relation_size('{S}.windows_v1')) / current_setting('block_size')::bigint;
	next := p_from + p_blocks;
	IF next >= pages THEN
		next := 0;
	END IF;
END
$f$;
`

// installLock is the advisory lock key every Store's schema install takes:
// concurrent CREATE OR REPLACE FUNCTION deadlocks with running calls and
// with each other.
const installLock = 7308332115233129841

// install runs the schema's SQL under the install lock, in one transaction.
func install(ctx context.Context, conn *pgx.Conn, schema string) error {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit: nil
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(installLock)); err != nil {
		return err
	}
	// Another Store may have installed it while this one waited. The
	// last function of the SQL tells: an earlier version's install lacks
	// it, and gets what it lacks.
	var have bool
	err = tx.QueryRow(ctx, "SELECT to_regprocedure($1) IS NOT NULL",
		pgx.Identifier{schema}.Sanitize()+".sweep_v2(bigint,integer)").Scan(&have)
	if err != nil {
		return err
	}
	if !have {
		if _, err := tx.Exec(ctx, SchemaSQL(schema)); err != nil {
			return err
		}
	}
	return tx.Commit(ctx)
}

// noSchema reports whether err is the server's answer that the schema
// itself is missing.
func noSchema(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "3F000"
}

// missingSchema reports whether err is the server's answer that the
// schema, a table or a function is missing: the statement did not run.
func missingSchema(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return false
	}
	switch pe.Code {
	case "3F000", "42883", "42P01", "42704": // invalid_schema_name, undefined_function, undefined_table, undefined_object
		return true
	}
	return false
}
