package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestGoal30(t *testing.T) {
	rows := []row{
		{System: "fleetstore-redis-hit", Concurrency: 64, ServerCPUus: 20},
		{System: "fleetstore-redis-hit-quota", Concurrency: 64, ServerCPUus: 22},
		{System: "fleetstore-valkey-hit", Concurrency: 64, ServerCPUus: 20},
		{System: "fleetstore-valkey-hit-quota", Concurrency: 64, ServerCPUus: 24},
		{System: "redis_rate", Concurrency: 64, ServerCPUus: 10},
	}
	var b bytes.Buffer
	printGoals(&b, rows, nil, true)
	want := "with a monthly quota ÷ without | 1.10×: met | 1.20×: NOT met | ≤ 1.15× |"
	if !strings.Contains(b.String(), want) {
		t.Errorf("goals lack %q:\n%s", want, b.String())
	}
	// A row with errors gives no figure; no figure at all, no table.
	rows[1].Errors, rows[3].Errors = 1, 1
	b.Reset()
	printGoals(&b, rows, nil, true)
	if strings.Contains(b.String(), "issue 30") {
		t.Errorf("issue 30's goal without a clean row:\n%s", b.String())
	}
}
