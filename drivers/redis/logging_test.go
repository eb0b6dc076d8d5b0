package redis

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/internal/testing/testserver"
)

func observed() (*zap.Logger, *observer.ObservedLogs) {
	core, logs := observer.New(zapcore.DebugLevel)
	return zap.New(core), logs
}

// entryText is everything a log entry says: message and every field.
func entryText(e observer.LoggedEntry) string {
	return fmt.Sprintf("%s %v", e.Message, e.ContextMap())
}

func count(logs *observer.ObservedLogs, substr string) int {
	n := 0
	for _, e := range logs.All() {
		if strings.Contains(e.Message, substr) {
			n++
		}
	}
	return n
}

// waitLog waits up to d for a log entry whose message contains substr.
func waitLog(logs *observer.ObservedLogs, substr string, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if count(logs, substr) > 0 {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// TestPasswordNeverLeaks: against a server with requirepass, opened with
// the password in the URL, no error and no log line ever holds it: not on
// success, a wrong password, a bad parameter, an outage or recovery.
func TestPasswordNeverLeaks(t *testing.T) {
	t.Parallel()
	const password = "s3cret-Pa55word"
	srv := testserver.StartRedis(t, testserver.Password(password),
		testserver.ConfigLines("maxmemory-policy allkeys-lru"))
	log, logs := observed()
	var errs []error
	check := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}

	st, _ := openStore(t, srv.URL()+"/0?timeout=2s", fleetstore.WithLogger(log))
	mustHit(t, st, []fleetstore.Charge{hooks("t")}, claim("t", "s", "k", "h"), fleetstore.OK)
	if !waitLog(logs, "maxmemory-policy", 5*time.Second) {
		t.Error("no maxmemory-policy warning")
	}

	// A wrong password, a user that does not exist.
	for _, raw := range []string{
		"redis://:wrong-" + password + "@" + srv.Addr,
		"redis://nobody:" + password + "@" + srv.Addr,
	} {
		bad, err := fleetstore.Open(raw, fleetstore.WithLogger(log))
		if err != nil {
			t.Fatal(err)
		}
		err = bad.Ping(ctx(t))
		if err == nil {
			t.Fatalf("ping with bad credentials: no error")
		}
		check(err)
		_, err = bad.Hit(ctx(t), []fleetstore.Charge{hooks("t")}, nil)
		check(err)
		bad.Close()
	}
	// Bad URLs.
	for _, raw := range []string{
		srv.URL() + "?bogus=1",
		srv.URL() + "?max_retries=3",
		srv.URL() + "?read_timeout=1h",
		srv.URL() + "/x",
		"redis+cluster://:" + password + "@" + srv.Addr + "/3",
		"redis://:" + password + "@" + srv.Addr + "?addr=nocolon",
		"redis://:" + password + "@[::1",
	} {
		_, err := fleetstore.Open(raw, fleetstore.WithLogger(log))
		if err == nil {
			t.Fatalf("open %q: no error", strings.ReplaceAll(raw, password, "xxx"))
		}
		check(err)
	}
	// An outage and the recovery.
	srv.Stop()
	for range 3 {
		_, err := st.Hit(ctx(t), []fleetstore.Charge{hooks("t")}, nil)
		check(err)
		check(st.Commit(ctx(t), *claim("t", "s", "k", "h"), *claim("u", "s", "k", "h")))
		check(st.Ping(ctx(t)))
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := st.Ping(ctx(t)); err != nil {
		t.Fatalf("ping after restart: %v", err)
	}

	for _, err := range errs {
		t.Log(err)
	}
	for _, e := range logs.All() {
		t.Log(entryText(e))
	}
	if len(errs) < 10 {
		t.Fatalf("only %d errors to check", len(errs))
	}
	for _, err := range errs {
		if strings.Contains(err.Error(), password) || strings.Contains(fmt.Sprintf("%+v", err), password) {
			t.Errorf("error holds the password: %v", err)
		}
	}
	if logs.Len() < 3 {
		t.Fatalf("only %d log entries to check", logs.Len())
	}
	for _, e := range logs.All() {
		if strings.Contains(entryText(e), password) {
			t.Errorf("log entry holds the password: %s", entryText(e))
		}
	}
}

// TestReachabilityLoggedOnce: an outage is one warning however many calls
// fail, and the recovery one info line.
func TestReachabilityLoggedOnce(t *testing.T) {
	t.Parallel()
	srv := testserver.StartRedis(t)
	log, logs := observed()
	st, _ := openStore(t, srv.URL()+"?timeout=1s", fleetstore.WithLogger(log))
	mustHit(t, st, []fleetstore.Charge{hooks("t")}, nil, fleetstore.OK)
	srv.Stop()
	for range 10 {
		if _, err := st.Hit(ctx(t), []fleetstore.Charge{hooks("t")}, nil); err == nil {
			t.Fatal("hit on a stopped server: no error")
		}
	}
	if n := count(logs, "unreachable"); n != 1 {
		t.Errorf("%d 'unreachable' lines for one outage, want 1", n)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	// The end of an outage is logged once no call has gone unanswered for
	// a second (a partial outage logs no end).
	time.Sleep(1100 * time.Millisecond)
	for range 5 {
		mustHit(t, st, []fleetstore.Charge{hooks("t")}, nil, fleetstore.OK)
	}
	if n := count(logs, "reachable again"); n != 1 {
		t.Errorf("%d 'reachable again' lines, want 1", n)
	}
	// An error reply is an answer: no outage.
	if _, err := srv.Do("CONFIG", "SET", "requirepass", "x"); err != nil {
		t.Fatal(err)
	}
	srv.Password = "x"
	_ = st.Ping(ctx(t))
	if n := count(logs, "unreachable"); n != 1 {
		t.Errorf("%d 'unreachable' lines after an error reply, want still 1", n)
	}
}
