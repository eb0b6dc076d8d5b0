package conformance

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Status is the verdict on one clause.
type Status string

// Verdicts.
const (
	Pass Status = "PASS"
	Fail Status = "FAIL"
	Skip Status = "SKIP"
)

// Report is the verdict on one clause, from Check.
type Report struct {
	ID       string   // "G1", "C10", …
	Title    string   // what the clause says, in a line
	Status   Status   // PASS, FAIL or SKIP
	Messages []string // why it failed or was skipped, and logs
	Elapsed  time.Duration
}

type clause struct {
	id, title string
	run       func(t *T)
}

// clauses lists every clause of CONTRACT §3–§6 in document order.
var clauses []clause

func register(id, title string, run func(t *T)) {
	clauses = append(clauses, clause{id: id, title: title, run: run})
	// Document order: G, C, T, V, then by number.
	rank := func(id string) int { return strings.IndexByte("GCTV", id[0])*100 + atoi(id[1:]) }
	slices.SortFunc(clauses, func(a, b clause) int { return rank(a.id) - rank(b.id) })
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}

// Clauses returns the ids of every clause the suite checks, in order.
func Clauses() []string {
	ids := make([]string, len(clauses))
	for i, c := range clauses {
		ids[i] = c.id
	}
	return ids
}

// Run runs every clause as a named subtest of t (t.Run("G1", …)). Clauses
// run one after another: several measure time.
func Run(t *testing.T, cfg Config) {
	t.Helper()
	s, err := newSuite(cfg)
	if err != nil {
		t.Fatalf("conformance: %v", err)
	}
	for _, c := range clauses {
		t.Run(c.id, func(tt *testing.T) {
			r := s.run(c)
			for _, m := range r.Messages {
				tt.Log(m)
			}
			switch r.Status {
			case Fail:
				tt.Errorf("%s %s: FAIL", c.id, c.title)
			case Skip:
				tt.Skipf("%s %s: SKIP", c.id, c.title)
			}
		})
	}
}

// Check runs the clauses outside go test and returns a report for each, in
// order; only, when not empty, limits them to those ids. each, when not
// nil, is called as every clause ends. It returns an error only when cfg
// is unusable (no URL, unknown scheme).
func Check(cfg Config, only []string, each func(Report)) ([]Report, error) {
	s, err := newSuite(cfg)
	if err != nil {
		return nil, err
	}
	for _, id := range only {
		if !slices.Contains(Clauses(), id) {
			return nil, fmt.Errorf("conformance: no clause %q (have %s)", id, strings.Join(Clauses(), ", "))
		}
	}
	var out []Report
	for _, c := range clauses {
		if len(only) > 0 && !slices.Contains(only, c.id) {
			continue
		}
		r := s.run(c)
		out = append(out, r)
		if each != nil {
			each(r)
		}
	}
	return out, nil
}

// suite is one run: the config with defaults and a random key_prefix.
type suite struct {
	cfg    Config
	prefix string
	url    string // cfg.URL with key_prefix set
}

func newSuite(cfg Config) (*suite, error) {
	if cfg.URL == "" {
		return nil, fmt.Errorf("conformance: Config.URL is empty")
	}
	if cfg.Granularity <= 0 {
		cfg.Granularity = time.Millisecond
	}
	if cfg.Stores <= 0 {
		cfg.Stores = 4
	}
	s := &suite{cfg: cfg, prefix: "fsconf-" + randHex(6)}
	u, err := s.withPrefix(cfg.URL)
	if err != nil {
		return nil, err
	}
	s.url = u
	// Fail early on an unknown scheme or a bad parameter.
	st, err := s.openStore(s.url)
	if err != nil {
		return nil, err
	}
	st.Close()
	return s, nil
}

// withPrefix sets key_prefix in raw's query. It edits the query alone, so
// an authority url.Parse refuses (memcached://h1:11211,h2) passes through.
func (s *suite) withPrefix(raw string) (string, error) {
	base, frag, _ := strings.Cut(raw, "#")
	base, query, _ := strings.Cut(base, "?")
	q, err := url.ParseQuery(query)
	if err != nil {
		return "", fmt.Errorf("conformance: URL query: %v", err)
	}
	q.Set("key_prefix", s.prefix)
	out := base + "?" + q.Encode()
	if frag != "" {
		out += "#" + frag
	}
	return out, nil
}

func (s *suite) run(c clause) Report {
	t := &T{s: s, id: c.id}
	start := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer t.runCleanups()
		defer func() {
			if p := recover(); p != nil {
				t.fail(fmt.Sprintf("panic: %v\n%s", p, debug.Stack()))
			}
		}()
		c.run(t)
	}()
	<-done
	r := Report{ID: c.id, Title: c.title, Status: Pass, Messages: t.msgs, Elapsed: time.Since(start)}
	switch {
	case t.failed:
		r.Status = Fail
	case t.skipped:
		r.Status = Skip
	}
	return r
}

// T is what a clause sees: testing.T's reporting methods, run outside
// go test too.
type T struct {
	s        *suite
	id       string
	mu       sync.Mutex
	msgs     []string
	failed   bool
	skipped  bool
	cleanups []func()
}

func (t *T) fail(msg string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.failed = true
	t.msgs = append(t.msgs, msg)
}

// Errorf records a failure and goes on. Safe from several goroutines.
func (t *T) Errorf(format string, args ...any) { t.fail(fmt.Sprintf(format, args...)) }

// Fatalf records a failure and ends the clause. Call it from the clause's
// goroutine only.
func (t *T) Fatalf(format string, args ...any) {
	t.fail(fmt.Sprintf(format, args...))
	runtime.Goexit()
}

// Skipf ends the clause as skipped, with the reason.
func (t *T) Skipf(format string, args ...any) {
	t.mu.Lock()
	t.skipped = true
	t.msgs = append(t.msgs, "skip: "+fmt.Sprintf(format, args...))
	t.mu.Unlock()
	runtime.Goexit()
}

// Logf records a message.
func (t *T) Logf(format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.msgs = append(t.msgs, fmt.Sprintf(format, args...))
}

// Cleanup registers f to run when the clause ends, last first.
// Safe from several goroutines.
func (t *T) Cleanup(f func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cleanups = append(t.cleanups, f)
}

func (t *T) runCleanups() {
	t.mu.Lock()
	fs := t.cleanups
	t.cleanups = nil
	t.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
}

// ctx is a context for calls that are not about time: generous, for a
// loaded 2-core machine.
func (t *T) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
