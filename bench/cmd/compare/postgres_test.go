package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// pgbench 15's report of a run of -T 3 -c 64.
const pgbenchOut = `pgbench (15.18 (Debian 15.18-0+deb12u1))
transaction type: <builtin: simple update>
scaling factor: 10
query mode: simple
number of clients: 64
number of threads: 2
maximum number of tries: 1
duration: 3 s
number of transactions actually processed: 2229
number of failed transactions: 0 (0.000%)
latency average = 62.1 ms
initial connection time = 1040.2 ms
tps = 1031.944 (without initial connection time)
`

func TestParsePgbench(t *testing.T) {
	n, d, err := parsePgbench([]byte(pgbenchOut))
	if err != nil {
		t.Fatal(err)
	}
	if n != 2229 {
		t.Errorf("transactions = %d, want 2229", n)
	}
	// 2229 ÷ 1031.944 tps: the connections' second left out.
	if want := 2160 * time.Millisecond; d.Round(time.Millisecond) != want {
		t.Errorf("seconds = %v, want %v", d, want)
	}
	for _, bad := range []string{
		strings.Replace(pgbenchOut, "tps = 1031.944", "tps = NaN", 1),
		strings.Replace(pgbenchOut, "processed: 2229", "processed: 0", 1),
		"pgbench: error: connection to server failed\n",
	} {
		if _, _, err := parsePgbench([]byte(bad)); err == nil {
			t.Errorf("no error for %q", bad)
		}
	}
}

func TestGoalsPostgres(t *testing.T) {
	statements := func(v float64) *float64 { return &v }
	rows := []row{
		{System: "fleetstore-postgres-hit", Concurrency: 64, OpsPerSec: 3000, ScriptCalls: statements(1.02)},
		{System: "fleetstore-postgres-hook", Concurrency: 64, OpsPerSec: 2000, ScriptCalls: statements(1.1)},
		{System: "pgbench-N", Concurrency: 64, OpsPerSec: 5000},
		{System: "pgx-job", Concurrency: 64, OpsPerSec: 900, ScriptCalls: statements(7)},
	}
	mem := []row{{System: "disk_per_claim", Server: "PostgreSQL 15", Bytes: 309, Items: 100}}
	var b bytes.Buffer
	printGoalsPostgres(&b, rows, mem, true)
	for _, want := range []string{
		"(2000 ÷ 5000) | 0.40×: NOT met | ≥ 0.5× |",
		"(2000 ÷ 900) | 2.22×: met | ≥ 2.0× |",
		"per round trip) | 1.02: met | 1 |",
		"fleetstore-postgres-hook | 1.10 | shown |",
		"pgx-job | 7.00 | shown |",
		"100 claims), PostgreSQL 15 | 309 | shown |",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("goals lack %q:\n%s", want, b.String())
		}
	}
	// A row with errors gives no figure.
	rows[2].Errors = 1
	b.Reset()
	printGoalsPostgres(&b, rows, nil, true)
	if strings.Contains(b.String(), "pgbench") {
		t.Errorf("a figure of a row with errors:\n%s", b.String())
	}
}
