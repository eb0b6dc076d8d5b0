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

	"github.com/fleetstore/fleetstore/driver"
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
	run       func(t *clauseT)
	// alone: the clause runs with no other clause of the process beside
	// it (timing). It measures calls against their budget or restarts the
	// server (T1–T5).
	alone bool
}

// clauses lists every clause of CONTRACT §3–§6 (§3.2 included) in document order.
var clauses []clause

// register adds a clause that may run beside the others: it works on
// fresh tenants, and whatever it times has slack for a busy machine.
func register(id, title string, run func(t *clauseT)) {
	add(clause{id: id, title: title, run: run})
}

// registerAlone adds a clause that runs with no other beside it.
func registerAlone(id, title string, run func(t *clauseT)) {
	add(clause{id: id, title: title, run: run, alone: true})
}

func add(c clause) {
	clauses = append(clauses, c)
	// Document order: G, Q (§3.2), C, T, V, then by number.
	rank := func(id string) int { return strings.IndexByte("GQCTV", id[0])*100 + atoi(id[1:]) }
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

// Run runs every clause as a named subtest of t (t.Run("G1", …)).
//
// Most clauses wait for time to pass (an expiry, a bucket draining) and
// use fresh tenants, so they run at once: each subtest starts its clause
// and pauses (t.Parallel) until the calling test returns, then reports.
// With a Config.Clock they run one after another instead, each moving
// the clock rather than sleeping. The timing clauses T1–T5 then run one
// after another, with no other clause of cfg beside them. Run returns
// once every clause has run.
//
// Run may be called from tests that run at once (t.Parallel), one per
// configuration: the timing clauses of one configuration then run with no
// clause of another beside them (timing), and T4 counts the goroutines of
// its own Store only.
func Run(t *testing.T, cfg Config) {
	t.Helper()
	s, err := newSuite(cfg)
	if err != nil {
		t.Fatalf("conformance: %v", err)
	}
	var running sync.WaitGroup
	timing.RLock()
	for _, c := range clauses {
		if !c.alone {
			t.Run(c.id, func(tt *testing.T) {
				done := s.begin(c, &running)
				if s.together() {
					tt.Parallel()
				}
				report(tt, c, <-done)
			})
		}
	}
	running.Wait()
	timing.RUnlock()
	timing.Lock()
	defer timing.Unlock()
	for _, c := range clauses {
		if c.alone {
			t.Run(c.id, func(tt *testing.T) { report(tt, c, s.run(c)) })
		}
	}
}

// report hands the verdict on c to tt, and how long the clause took (the
// subtest's own time is only its report's when it ran beside others).
func report(tt *testing.T, c clause, r Report) {
	tt.Logf("%s took %v", c.id, r.Elapsed.Round(time.Millisecond))
	for _, m := range r.Messages {
		tt.Log(m)
	}
	switch r.Status {
	case Fail:
		tt.Errorf("%s %s: FAIL", c.id, c.title)
	case Skip:
		tt.Skipf("%s %s: SKIP", c.id, c.title)
	}
}

// Check runs the clauses outside go test and returns a report for each, in
// document order; only, when not empty, limits them to those ids. It runs
// them as Run does: every clause but T1–T5 at once (one after another
// with a Config.Clock), then T1–T5 one by one. each, when not nil, is
// called with every report in document order, as soon as it and every
// report before it are in. It returns an error only when cfg is unusable
// (no URL, unknown scheme, a clause id that is none).
func Check(cfg Config, only []string, each func(Report)) ([]Report, error) {
	for _, id := range only {
		if !slices.Contains(Clauses(), id) {
			return nil, fmt.Errorf("conformance: no clause %q (have %s)", id, strings.Join(Clauses(), ", "))
		}
	}
	s, err := newSuite(cfg)
	if err != nil {
		return nil, err
	}
	var picked []clause
	for _, c := range clauses {
		if len(only) == 0 || slices.Contains(only, c.id) {
			picked = append(picked, c)
		}
	}
	var running sync.WaitGroup
	begun := make([]<-chan Report, len(picked))
	timing.RLock()
	for i, c := range picked {
		if !c.alone {
			begun[i] = s.begin(c, &running)
		}
	}
	shared := true // timing is read-locked
	defer func() {
		if shared {
			timing.RUnlock()
		} else {
			timing.Unlock()
		}
	}()
	var out []Report
	for i, c := range picked {
		var r Report
		if c.alone {
			if shared {
				running.Wait()
				timing.RUnlock()
				timing.Lock()
				shared = false
			}
			r = s.run(c)
		} else {
			r = <-begun[i]
		}
		out = append(out, r)
		if each != nil {
			each(r)
		}
	}
	return out, nil
}

// begin starts c and returns the channel its report comes on. When the
// clauses run together, c runs in the background, counted in running;
// otherwise it runs to its end before begin returns.
func (s *suite) begin(c clause, running *sync.WaitGroup) <-chan Report {
	done := make(chan Report, 1)
	if !s.together() {
		done <- s.run(c)
		return done
	}
	running.Add(1)
	go func() {
		defer running.Done()
		done <- s.run(c)
	}()
	return done
}

// suite is one run: the config with defaults and a random key_prefix.
type suite struct {
	cfg    Config
	clock  Clock // cfg.Clock, or the wall clock
	prefix string
	url    string // cfg.URL with key_prefix set
	peeks  bool   // the driver has driver.Peeker: the calls of T1–T6 include Peek
}

func newSuite(cfg Config) (*suite, error) {
	if cfg.URL == "" {
		return nil, fmt.Errorf("conformance: Config.URL is empty")
	}
	if cfg.Stores <= 0 {
		cfg.Stores = 4
	}
	if cfg.AddrURL == nil && firstHostPort(cfg.URL) != "" {
		raw := cfg.URL
		cfg.AddrURL = func(addr string) string { return swapHost(raw, addr) }
	}
	s := &suite{cfg: cfg, clock: cfg.Clock, prefix: "fsconf-" + randHex(6)}
	if s.clock == nil {
		s.clock = wallClock{}
	}
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
	// A Peek of no limits makes no driver call: it only says whether the
	// driver can (errors.ErrUnsupported).
	_, err = st.Peek(context.Background(), "conformance")
	s.peeks = err == nil
	st.Close()
	if s.cfg.Granularity <= 0 {
		s.cfg.Granularity = time.Millisecond
		if g, ok := st.Driver().(driver.ExpiryGranularity); ok && g.ExpiryGranularity() > 0 {
			s.cfg.Granularity = g.ExpiryGranularity()
		}
	}
	if s.cfg.Granularity > MaxGranularity {
		return nil, fmt.Errorf("conformance: expiry granularity %v is above %v: a record that "+
			"lingers that long past its expiry is no expiry (and G7, C9 would wait that long)",
			s.cfg.Granularity, MaxGranularity)
	}
	return s, nil
}

// MaxGranularity is the largest expiry granularity the suite accepts
// (driver.ExpiryGranularity or Config.Granularity): memcached's, 2s, with
// room.
const MaxGranularity = 5 * time.Second

// together reports whether the clauses that may run together run at
// once: not with a Clock, which every clause would move for all, nor when
// the config asks for Serial.
func (s *suite) together() bool { return s.cfg.Clock == nil && !s.cfg.Serial }

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

// timing keeps the timing clauses (T1–T5) of a configuration apart from
// every other clause of the process: a configuration's clauses that run
// at once hold it shared, from the first one's start to the last one's
// end; its timing clauses hold it alone, from T1's start to T5's end. The
// calls they time are then not crowded by another configuration's
// floods, restarts and timed calls.
var timing = newPhaseLock()

// phaseLock is a readers–writer lock that lets readers in while a writer
// waits (sync.RWMutex does not): configurations started at once run their
// shared clauses together, then their timing clauses one at a time.
type phaseLock struct {
	mu      sync.Mutex
	changed sync.Cond
	readers int
	writer  bool
}

func newPhaseLock() *phaseLock {
	l := &phaseLock{}
	l.changed.L = &l.mu
	return l
}

// RLock waits until no writer holds l, then holds it shared.
func (l *phaseLock) RLock() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.writer {
		l.changed.Wait()
	}
	l.readers++
}

// RUnlock ends a shared hold.
func (l *phaseLock) RUnlock() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.readers--
	l.changed.Broadcast()
}

// Lock waits until no one holds l, then holds it alone.
func (l *phaseLock) Lock() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.writer || l.readers > 0 {
		l.changed.Wait()
	}
	l.writer = true
}

// Unlock ends an exclusive hold.
func (l *phaseLock) Unlock() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writer = false
	l.changed.Broadcast()
}

func (s *suite) run(c clause) Report {
	if why, ok := s.cfg.Omit[c.id]; ok {
		return Report{ID: c.id, Title: c.title, Status: Skip,
			Messages: []string{"skip: omitted by the config: " + why}}
	}
	t := &clauseT{s: s, id: c.id}
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
	limit := s.cfg.ClauseTimeout
	if limit <= 0 {
		limit = DefaultClauseTimeout
	}
	watchdog := time.NewTimer(limit)
	defer watchdog.Stop()
	select {
	case <-done:
	case <-watchdog.C:
		// The clause's goroutine is left behind: a call that ignores its
		// context cannot be stopped from here.
		return Report{ID: c.id, Title: c.title, Status: Fail, Elapsed: time.Since(start),
			Messages: append(t.messages(), fmt.Sprintf("%s did not end within %v (Config.ClauseTimeout): "+
				"a call that ignores its context's deadline hangs it; the suite's goroutines:\n%s",
				c.id, limit, suiteStacks()))}
	}
	r := Report{ID: c.id, Title: c.title, Status: Pass, Messages: t.messages(), Elapsed: time.Since(start)}
	switch {
	case t.failed:
		r.Status = Fail
	case t.skipped:
		r.Status = Skip
	}
	return r
}

// clauseT is what a clause sees: testing.T's reporting methods, run
// outside go test too, and the suite's store, clock and helpers.
type clauseT struct {
	s        *suite
	id       string
	mu       sync.Mutex
	msgs     []string
	repeats  []int          // repeats[i]: how many times msgs[i] was recorded
	seen     map[string]int // message → its index in msgs
	failed   bool
	skipped  bool
	cleanups []func()
}

func (t *clauseT) fail(msg string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.failed = true
	t.add(msg)
}

// add records msg; a message recorded before is counted, not repeated
// (200 concurrent calls that fail alike are one line with its count).
// t.mu is held.
func (t *clauseT) add(msg string) {
	if i, ok := t.seen[msg]; ok {
		t.repeats[i]++
		return
	}
	if t.seen == nil {
		t.seen = map[string]int{}
	}
	t.seen[msg] = len(t.msgs)
	t.msgs = append(t.msgs, msg)
	t.repeats = append(t.repeats, 1)
}

// messages returns the messages recorded, each repeated one with its
// count: "concurrent hit: timeout (×167)".
func (t *clauseT) messages() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]string, len(t.msgs))
	for i, m := range t.msgs {
		out[i] = m
		if n := t.repeats[i]; n > 1 {
			out[i] = fmt.Sprintf("%s (×%d)", m, n)
		}
	}
	return out
}

// DefaultClauseTimeout is how long a clause may run before the suite
// reports it as hung (Config.ClauseTimeout): the slowest clause takes
// about 15s on a loaded machine.
const DefaultClauseTimeout = 3 * time.Minute

// suiteStacks returns the stacks of the goroutines that run the suite's
// code (a hung clause's among them), at most 32 KiB.
func suiteStacks() string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "fleetstore/conformance.") && !strings.Contains(g, "conformance.suiteStacks") {
			out = append(out, g)
		}
	}
	all := strings.Join(out, "\n\n")
	if len(all) > 32<<10 {
		all = all[:32<<10] + "\n…"
	}
	return all
}

// hasFailed reports whether the clause has failed so far.
func (t *clauseT) hasFailed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.failed
}

// Errorf records a failure and goes on. Safe from several goroutines.
func (t *clauseT) Errorf(format string, args ...any) { t.fail(fmt.Sprintf(format, args...)) }

// Fatalf records a failure and ends the clause. Call it from the clause's
// goroutine only.
func (t *clauseT) Fatalf(format string, args ...any) {
	t.fail(fmt.Sprintf(format, args...))
	runtime.Goexit()
}

// Skipf ends the clause as skipped, with the reason.
func (t *clauseT) Skipf(format string, args ...any) {
	t.mu.Lock()
	t.skipped = true
	t.add("skip: " + fmt.Sprintf(format, args...))
	t.mu.Unlock()
	runtime.Goexit()
}

// Logf records a message.
func (t *clauseT) Logf(format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.add(fmt.Sprintf(format, args...))
}

// Cleanup registers f to run when the clause ends, last first.
// Safe from several goroutines.
func (t *clauseT) Cleanup(f func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cleanups = append(t.cleanups, f)
}

func (t *clauseT) runCleanups() {
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
func (t *clauseT) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
