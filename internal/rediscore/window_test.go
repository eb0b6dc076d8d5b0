package rediscore_test

import (
	"errors"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/internal/scripts"
	"github.com/fleetstore/fleetstore/internal/testing/testserver"
)

// Calendar quotas' window charges (CONTRACT §3.2) in the scripts, driver
// level, on both drivers of the core, one server and a cluster: the
// count is a field of the tenant's shard 0, checked with the GCRA charges
// before anything is written, counted in the window holding the server's
// clock, reported as Used and ResetAfter, read by Peek, cleared by Reset.
// The conformance suite's Q clauses hold the contract; these hold what is
// the scripts' own: the field, its expiry, a passed window's count, the
// errors, and rounds.

// openConn opens raw's driver directly under a fresh key_prefix: the
// Store's checks of window charges are not what is tested here.
func openConn(t *testing.T, raw string) (driver.Conn, string) {
	t.Helper()
	st, prefix := openGroup(t, raw)
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	c, err := st.Driver().Open(driver.Config{URL: u, KeyPrefix: prefix, Timeout: 10 * time.Second,
		Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, prefix
}

// window is a window charge of tenant's kind k: cost of max per window of
// length w, the middle one of the three starting w/2 before now (this
// machine's clock, which the servers share), so that a test has w/2 before
// its end whatever the time of day.
func window(tenant string, k driver.Kind, cost, max int64, w time.Duration) driver.Charge {
	us := w.Microseconds()
	e1 := time.Now().UnixMicro() - us/2
	return driver.Charge{Kind: k, Tenant: tenant,
		Window: driver.Window{Max: max, Cost: cost, Edges: [4]int64{e1 - us, e1, e1 + us, e1 + 2*us}}}
}

func hitConn(t *testing.T, c driver.Conn, charges []driver.Charge, cl *driver.Claim) driver.Result {
	t.Helper()
	res, err := c.Hit(gctx(t, 10*time.Second), charges, cl)
	if err != nil {
		t.Fatalf("hit: %v", err)
	}
	return res
}

// TestWindowCharges: a window admits Max units; each Hit reports the
// count after it and the time left in the window; a denied window writes
// nothing, nor does a denied GCRA charge beside it, nor a Duplicate
// (all-or-nothing both ways, G3); Peek reads the count as it stands;
// Reset clears it. Fails if the count is read from or written to another
// window, if a denial writes, or if Reset leaves a count.
func TestWindowCharges(t *testing.T) {
	t.Parallel()
	onServerAndCluster(t, testWindowCharges)
}

func testWindowCharges(t *testing.T, raw string, _ bool, servers ...*testserver.Redis) {
	c, _ := openConn(t, raw)
	tenant := "tw-" + randHex(3)
	const hour = time.Hour
	q := window(tenant, "monthly", 2, 5, hour)
	gcra := driver.Charge{Kind: "hooks", Tenant: tenant, Increment: time.Minute, Capacity: 3 * time.Minute}
	end := time.UnixMicro(q.Window.Edges[2])
	check := func(what string, res driver.Result, want driver.Outcome, used int64) {
		t.Helper()
		if res.Outcome != want || res.NBuckets != 2 || res.Buckets[1].Used != used {
			t.Fatalf("%s: %v with %d buckets, the window's used %d; want %v and %d", what, res.Outcome,
				res.NBuckets, res.Buckets[1].Used, want, used)
		}
		left := time.Until(end)
		if got := res.Buckets[1].ResetAfter; got > left+time.Second || got < left-5*time.Second {
			t.Errorf("%s: the window resets after %v, want about %v (its end)", what, got, left)
		}
		if res.Buckets[0].Used != 0 {
			t.Errorf("%s: the GCRA charge reports used %d", what, res.Buckets[0].Used)
		}
	}
	both := []driver.Charge{gcra, q}
	check("first", hitConn(t, c, both, nil), driver.OK, 2)
	check("second", hitConn(t, c, both, nil), driver.OK, 4)
	// 4 + 2 > 5: denied, the time left in the window its wait; the GCRA
	// charge beside it is not taken (its reset-after stays 2min).
	res := hitConn(t, c, both, nil)
	check("over the quota", res, driver.RateLimited, 4)
	if left := time.Until(end); res.RetryAfter < left-5*time.Second || res.RetryAfter > left+time.Second {
		t.Errorf("over the quota: retry after %v, want the window's end, %v", res.RetryAfter, left)
	}
	if got := res.Buckets[0].ResetAfter; got > 2*time.Minute || got < 2*time.Minute-5*time.Second {
		t.Errorf("the GCRA charge beside a denied window: reset-after %v, want its 2min as it stood", got)
	}
	// A cost of 1 still fits.
	one := q
	one.Window.Cost = 1
	check("a cost that fits", hitConn(t, c, []driver.Charge{gcra, one}, nil), driver.OK, 5)
	// The GCRA charge denies (3 of 3 minutes taken): the window is not
	// counted. A fresh window kind keeps the count checkable.
	q2 := window(tenant, "daily", 1, 10, hour)
	check("a GCRA denial", hitConn(t, c, []driver.Charge{gcra, q2}, nil), driver.RateLimited, 0)
	gcra2 := driver.Charge{Kind: "bytes", Tenant: tenant, Increment: time.Second, Capacity: time.Hour}
	check("q2 first", hitConn(t, c, []driver.Charge{gcra2, q2}, nil), driver.OK, 1)
	// A Duplicate charges nothing.
	cl := driver.Claim{Tenant: tenant, SourceID: "github", Key: "k-" + randHex(3), HookID: "h1", TTL: hour,
		PendingTTL: time.Minute}
	if errs, err := c.Commit(gctx(t, 10*time.Second), []driver.Claim{cl}); err != nil || errs[0] != nil {
		t.Fatal(err, errs)
	}
	other := cl
	other.HookID = "h2"
	check("a Duplicate", hitConn(t, c, []driver.Charge{gcra2, q2}, &other), driver.Duplicate, 1)
	// Peek reads the counts as they stand, and an absent one as 0.
	p, ok := c.(driver.Peeker)
	if !ok {
		t.Fatal("no Peek")
	}
	pr, err := p.Peek(gctx(t, 10*time.Second), []driver.Charge{q, q2, window(tenant, "none", 1, 1, hour), gcra})
	if err != nil {
		t.Fatal(err)
	}
	if pr.NBuckets != 4 || pr.Buckets[0].Used != 5 || pr.Buckets[1].Used != 1 || pr.Buckets[2].Used != 0 ||
		pr.Buckets[3].Used != 0 || pr.Buckets[2].ResetAfter < hour/2-time.Minute {
		t.Errorf("Peek: %+v, want used 5, 1, 0 and the GCRA bucket", pr.Buckets)
	}
	// Reset clears the counts: the quota admits 5 again.
	if err := c.Reset(gctx(t, 10*time.Second), tenant); err != nil {
		t.Fatal(err)
	}
	big := q
	big.Window.Cost = 5
	check("after Reset", hitConn(t, c, []driver.Charge{gcra2, big}, nil), driver.OK, 5)
}

// TestWindowField: the count is field K# of shard 0, "START END COUNT"
// for the window holding the server's clock; shard 0 lives until the
// window's end; a count of a passed window is 0 in the next, which
// overwrites it; a count of the window's START is its count until its
// END, whatever that END; a clock outside the windows sent, or a count
// that is not START END COUNT, is an error reply and writes nothing.
func TestWindowField(t *testing.T) {
	t.Parallel()
	onServerAndCluster(t, testWindowField)
}

func testWindowField(t *testing.T, raw string, _ bool, servers ...*testserver.Redis) {
	c, prefix := openConn(t, raw)
	tenant := "tf-" + randHex(3)
	s0 := scripts.ShardKey(prefix, tenant, 0)
	do := func(args ...string) any {
		t.Helper()
		for _, n := range servers {
			v, err := n.Do(args...)
			if err == nil {
				return v
			}
			if !isMoved(err) {
				t.Fatal(err)
			}
		}
		t.Fatalf("no node answers %q", args)
		return nil
	}
	q := window(tenant, "monthly", 3, 100, 24*time.Hour)
	end := q.Window.Edges[2]
	field := func(count int64) string {
		return formatInt(q.Window.Edges[1]) + " " + formatInt(end) + " " + formatInt(count)
	}
	hitConn(t, c, []driver.Charge{q}, nil)
	if v := do("HGET", s0, scripts.WindowField("monthly")); v != field(3) {
		t.Fatalf("the count's field holds %q, want %q", v, field(3))
	}
	pttl, _ := do("PTTL", s0).(int64)
	if left := time.Until(time.UnixMicro(end)); time.Duration(pttl)*time.Millisecond < left-time.Minute ||
		time.Duration(pttl)*time.Millisecond > left+2*time.Second {
		t.Errorf("shard 0 expires in %vms, want the window's end, %v", pttl, left)
	}
	// A passed window's count: 0 in this one, then overwritten.
	do("HSET", s0, scripts.WindowField("monthly"), formatInt(q.Window.Edges[0])+" "+formatInt(q.Window.Edges[1])+" 99")
	if res := hitConn(t, c, []driver.Charge{q}, nil); res.Outcome != driver.OK || res.Buckets[0].Used != 3 {
		t.Errorf("over a passed window's count: %v, used %d; want OK, 3", res.Outcome, res.Buckets[0].Used)
	}
	if v := do("HGET", s0, scripts.WindowField("monthly")); v != field(3) {
		t.Errorf("the passed window's count became %q, want %q", v, field(3))
	}
	// A count of this START whose END has passed (a shorter period's)
	// is 0; one whose END is ahead (a longer period's) is this window's,
	// and the write stores this window's END.
	start := formatInt(q.Window.Edges[1]) + " "
	do("HSET", s0, scripts.WindowField("monthly"), start+formatInt(time.Now().Add(-time.Minute).UnixMicro())+" 99")
	if res := hitConn(t, c, []driver.Charge{q}, nil); res.Outcome != driver.OK || res.Buckets[0].Used != 3 {
		t.Errorf("over an ended count of the window's start: %v, used %d; want OK, 3", res.Outcome, res.Buckets[0].Used)
	}
	do("HSET", s0, scripts.WindowField("monthly"), start+formatInt(end+time.Hour.Microseconds())+" 7")
	if res := hitConn(t, c, []driver.Charge{q}, nil); res.Outcome != driver.OK || res.Buckets[0].Used != 10 {
		t.Errorf("over a live count of the window's start: %v, used %d; want OK, 10", res.Outcome, res.Buckets[0].Used)
	}
	if p, ok := c.(driver.Peeker); ok {
		do("HSET", s0, scripts.WindowField("monthly"), start+formatInt(end+time.Hour.Microseconds())+" 10")
		if pr, err := p.Peek(gctx(t, 10*time.Second), []driver.Charge{q}); err != nil || pr.Buckets[0].Used != 10 {
			t.Errorf("Peek of a live count of the window's start: %v, %+v; want used 10", err, pr.Buckets)
		}
		do("HSET", s0, scripts.WindowField("monthly"), start+formatInt(time.Now().Add(-time.Minute).UnixMicro())+" 10")
		if pr, err := p.Peek(gctx(t, 10*time.Second), []driver.Charge{q}); err != nil || pr.Buckets[0].Used != 0 {
			t.Errorf("Peek of an ended count of the window's start: %v, %+v; want used 0", err, pr.Buckets)
		}
	}
	do("HSET", s0, scripts.WindowField("monthly"), field(3))
	// The server's clock outside the windows sent: an error, nothing
	// written (the GCRA charge beside it included).
	past := q
	for i := range past.Window.Edges {
		past.Window.Edges[i] -= 10 * 24 * time.Hour.Microseconds()
	}
	gcra := driver.Charge{Kind: "hooks", Tenant: tenant, Increment: time.Minute, Capacity: time.Hour}
	for _, charges := range [][]driver.Charge{{gcra, past}, {past}} {
		_, err := c.Hit(gctx(t, 10*time.Second), charges, nil)
		var reply *driver.ReplyError
		if !errors.As(err, &reply) || !strings.Contains(err.Error(), "outside the windows") {
			t.Errorf("a clock outside the windows: %v, want the error reply saying so", err)
		}
	}
	if v := do("HEXISTS", s0, scripts.TATField("hooks")); v != int64(0) {
		t.Errorf("the refused Hit wrote the GCRA charge's TAT")
	}
	if v := do("HGET", s0, scripts.WindowField("monthly")); v != field(3) {
		t.Errorf("the refused Hit changed the count to %q", v)
	}
	if p, ok := c.(driver.Peeker); ok {
		if _, err := p.Peek(gctx(t, 10*time.Second), []driver.Charge{past}); err == nil {
			t.Errorf("Peek with the clock outside the windows: no error")
		}
	}
	// A count that is not START END COUNT: an error, never a decision
	// (V4), whether its START is the window's or not.
	for _, v := range []string{"", "3", "x 3", formatInt(end) + " 3", start + "-3", start + "x",
		start + formatInt(end) + " -3", start + formatInt(end) + " 12345678901234567", "1e15 " + formatInt(end) + " 3", "1 2 3 4", start + formatInt(end) + " 3 ",
		"1 x 3", "12345678901234567 1 3"} {
		do("HSET", s0, scripts.WindowField("monthly"), v)
		if _, err := c.Hit(gctx(t, 10*time.Second), []driver.Charge{q}, nil); err == nil {
			t.Errorf("a count of %q: no error", v)
		}
		if p, ok := c.(driver.Peeker); ok {
			if _, err := p.Peek(gctx(t, 10*time.Second), []driver.Charge{q}); err == nil {
				t.Errorf("Peek of a count of %q: no error", v)
			}
		}
	}
}

// TestWindowSharedStart: a count is keyed by its window's start (CONTRACT
// §3.2). A day and a week that start together, a plan change at a
// Monday's midnight, share one count, which lasts to the end of the
// window a Hit charged: its field holds that window's end. A day and a
// week that only end together, Sunday's day and the ISO week, do not.
// Fails if the count is keyed by the window's end, or by its whole span.
func TestWindowSharedStart(t *testing.T) {
	t.Parallel()
	onServerAndCluster(t, testWindowSharedStart)
}

func testWindowSharedStart(t *testing.T, raw string, _ bool, servers ...*testserver.Redis) {
	c, prefix := openConn(t, raw)
	tenant := "ts-" + randHex(3)
	p, ok := c.(driver.Peeker)
	if !ok {
		t.Fatal("no Peek")
	}
	day, week := 24*time.Hour.Microseconds(), 7*24*time.Hour.Microseconds()
	charge := func(k driver.Kind, max int64, e [4]int64) driver.Charge {
		return driver.Charge{Kind: k, Tenant: tenant, Window: driver.Window{Max: max, Cost: 1, Edges: e}}
	}
	used := func(what string, ch driver.Charge, want driver.Outcome, n int64) {
		t.Helper()
		if res := hitConn(t, c, []driver.Charge{ch}, nil); res.Outcome != want || res.Buckets[0].Used != n {
			t.Errorf("%s: %v, used %d; want %v, used %d", what, res.Outcome, res.Buckets[0].Used, want, n)
		}
	}
	// stored checks the shared count's field: the start, the end of the
	// window charged last, and the units.
	s0 := scripts.ShardKey(prefix, tenant, 0)
	stored := func(what string, want string) {
		t.Helper()
		for _, n := range servers {
			if v, err := n.Do("HGET", s0, scripts.WindowField("started")); err == nil && v != want {
				t.Errorf("%s: the shared count holds %q, want %q", what, v, want)
			}
		}
	}
	// Starting together an hour ago.
	s := time.Now().Add(-time.Hour).UnixMicro()
	sDay := charge("started", 100, [4]int64{s - day, s, s + day, s + 2*day})
	sWeek := charge("started", 3, [4]int64{s - week, s, s + week, s + 2*week})
	used("the day", sDay, driver.OK, 1)
	used("the week starting with the day", sWeek, driver.OK, 2)
	used("the week again", sWeek, driver.OK, 3)
	stored("after the week's Hit", formatInt(s)+" "+formatInt(s+week)+" 3")
	used("the week over its max", sWeek, driver.RateLimited, 3)
	used("the day after the week", sDay, driver.OK, 4)
	stored("after the day's Hit", formatInt(s)+" "+formatInt(s+day)+" 4")
	pr, err := p.Peek(gctx(t, 10*time.Second), []driver.Charge{sWeek, sDay})
	if err != nil || pr.Buckets[0].Used != 4 || pr.Buckets[1].Used != 4 {
		t.Errorf("Peek of the week and the day starting together: %v, %+v; want used 4 and 4", err, pr.Buckets)
	}
	// Ending together in an hour.
	e := time.Now().Add(time.Hour).UnixMicro()
	eDay := charge("ended", 100, [4]int64{e - 2*day, e - day, e, e + day})
	eWeek := charge("ended", 1, [4]int64{e - 2*week, e - week, e, e + week})
	used("the day ending with the week", eDay, driver.OK, 1)
	used("the week ending with the day", eWeek, driver.OK, 1)
	pr, err = p.Peek(gctx(t, 10*time.Second), []driver.Charge{eWeek})
	if err != nil || pr.Buckets[0].Used != 1 {
		t.Errorf("Peek of the week ending with the day: %v, %+v; want used 1", err, pr.Buckets)
	}
	used("the week over its max", eWeek, driver.RateLimited, 1)
}

// TestWindowsInRounds: concurrent Hits of one tenant's quota, in rounds:
// exactly Max of them are counted, whatever the rounds they share.
func TestWindowsInRounds(t *testing.T) {
	t.Parallel()
	onServerAndCluster(t, testWindowsInRounds)
}

func testWindowsInRounds(t *testing.T, raw string, _ bool, servers ...*testserver.Redis) {
	c, _ := openConn(t, raw)
	tenant := "tr-" + randHex(3)
	q := window(tenant, "monthly", 1, 20, 24*time.Hour)
	hitConn(t, c, []driver.Charge{window(tenant, "warm", 1, 1, time.Hour)}, nil)
	waitLibrary(t, servers...)
	const n = 32
	var wg sync.WaitGroup
	var mu sync.Mutex
	outcomes := map[driver.Outcome]int{}
	maxUsed := int64(0)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := &driver.Claim{Tenant: tenant, SourceID: "s", Key: "k-" + formatInt(int64(i)), HookID: "h",
				TTL: time.Hour, PendingTTL: time.Minute}
			res, err := c.Hit(gctx(t, 10*time.Second), []driver.Charge{q}, cl)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Errorf("hit %d: %v", i, err)
				return
			}
			outcomes[res.Outcome]++
			maxUsed = max(maxUsed, res.Buckets[0].Used)
		}()
	}
	wg.Wait()
	if outcomes[driver.OK] != 20 || outcomes[driver.RateLimited] != n-20 || maxUsed != 20 {
		t.Errorf("%d concurrent Hits on a quota of 20: %v, the highest count %d; want 20 OK", n, outcomes, maxUsed)
	}
}

func formatInt(v int64) string { return strconv.FormatInt(v, 10) }

// isMoved reports whether err is a cluster node's redirection: the key is
// another node's.
func isMoved(err error) bool {
	return strings.HasPrefix(err.Error(), "MOVED") || strings.HasPrefix(err.Error(), "ASK")
}

// TestRoundWindowsInOrder: window charges queued in one round are decided
// in order, as if sent alone. With the servers stopped (SIGSTOP) and a
// Commit of the tenant in flight, six Hits queue 100ms apart; when the
// servers run again they go as one round (two script calls in all):
// a Hit denied by a bucket counts nothing in its quota, each Hit sees the
// counts of the Hits before it, the quota denies once full, and a Pending
// claim counts nothing. Fails if a round's Hits read the counts before
// the others' writes, or if a denied Hit counts.
func TestRoundWindowsInOrder(t *testing.T) {
	t.Parallel()
	onServerAndCluster(t, testRoundWindowsInOrder)
}

func testRoundWindowsInOrder(t *testing.T, raw string, _ bool, servers ...*testserver.Redis) {
	c, _ := openConn(t, raw)
	tenant := "to-" + randHex(3)
	q := window(tenant, "monthly", 1, 3, time.Hour)
	q2 := q
	q2.Window.Cost = 2
	claims := window(tenant, "daily", 1, 5, time.Hour)
	bytes := driver.Charge{Kind: "bytes", Tenant: tenant, Increment: 4 * time.Hour, Capacity: 5 * time.Hour}
	hitConn(t, c, []driver.Charge{bytes}, nil) // the bytes bucket full: a second charge is denied
	waitLibrary(t, servers...)
	key := driver.Claim{Tenant: tenant, SourceID: "github", Key: "k-" + randHex(3), HookID: "h1",
		TTL: time.Hour, PendingTTL: time.Minute}
	key2 := key
	key2.HookID = "h2"
	type step struct {
		name    string
		charges []driver.Charge
		claim   *driver.Claim
		want    driver.Outcome
		used    int64 // the last charge's
		got     driver.Result
		err     error
	}
	steps := []*step{
		{name: "a unit", charges: []driver.Charge{q}, want: driver.OK, used: 1},
		{name: "a unit beside a full bucket", charges: []driver.Charge{bytes, q}, want: driver.RateLimited, used: 1},
		{name: "two units", charges: []driver.Charge{q2}, want: driver.OK, used: 3},
		{name: "a unit over the quota", charges: []driver.Charge{q}, want: driver.RateLimited, used: 3},
		{name: "a claim by h1", charges: []driver.Charge{claims}, claim: &key, want: driver.OK, used: 1},
		{name: "the claim by h2", charges: []driver.Charge{claims}, claim: &key2, want: driver.Pending, used: 1},
	}
	before := scriptCalls(t, servers...)
	for _, srv := range servers {
		if err := srv.Freeze(); err != nil {
			t.Fatal(err)
		}
	}
	thawed := false
	thaw := func() {
		if !thawed {
			thawed = true
			for _, srv := range servers {
				if err := srv.Thaw(); err != nil {
					t.Error(err)
				}
			}
		}
	}
	defer thaw()
	var wg sync.WaitGroup
	var first error
	wg.Go(func() {
		cl := key
		cl.Key, cl.HookID = "first-"+randHex(3), "first"
		_, first = c.Commit(gctx(t, 20*time.Second), []driver.Claim{cl})
	})
	time.Sleep(200 * time.Millisecond)
	for _, s := range steps {
		wg.Go(func() { s.got, s.err = c.Hit(gctx(t, 20*time.Second), s.charges, s.claim) })
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	thaw()
	wg.Wait()
	if first != nil {
		t.Fatalf("the Commit in flight: %v", first)
	}
	for _, s := range steps {
		last := s.got.Buckets[max(s.got.NBuckets-1, 0)]
		switch {
		case s.err != nil:
			t.Errorf("%s: %v", s.name, s.err)
		case s.got.Outcome != s.want || last.Used != s.used:
			t.Errorf("%s: %v, used %d; want %v, used %d", s.name, s.got.Outcome, last.Used, s.want, s.used)
		}
	}
	if got := scriptCalls(t, servers...) - before; got != 2 {
		t.Errorf("%d script calls, want 2: the Commit in flight, then one round of the %d Hits", got, len(steps))
	}
}

// TestCountsAndTATsAcrossSplits: shard 0 keeps the TATs and the quota
// counts, kinds of 15 and 16 bytes included ("K::", "K##" beside "K:",
// "K#"), while the tenant's claims split it, Commits and Hits in rounds
// meanwhile. After the splits every count and TAT is as the Hits left it
// and shard 0 holds them and its state alone; Reset deletes them and
// leaves the claims. Fails if a prune or split moves or drops a field
// that is not a record, or if Reset misses one or deletes a claim.
func TestCountsAndTATsAcrossSplits(t *testing.T) {
	t.Parallel()
	onServerAndCluster(t, testCountsAndTATsAcrossSplits)
}

func testCountsAndTATsAcrossSplits(t *testing.T, raw string, _ bool, servers ...*testserver.Redis) {
	c, prefix := openConn(t, raw)
	tenant := "tk-" + randHex(3)
	s0 := scripts.ShardKey(prefix, tenant, 0)
	do := func(args ...string) any {
		t.Helper()
		for _, n := range servers {
			v, err := n.Do(args...)
			if err == nil {
				return v
			}
			if !isMoved(err) {
				t.Fatal(err)
			}
		}
		t.Fatalf("no node answers %q", args)
		return nil
	}
	g15 := driver.Charge{Kind: "abcdefghijklmno", Tenant: tenant, Increment: time.Minute, Capacity: time.Hour}
	g16 := driver.Charge{Kind: "abcdefghijklmnop", Tenant: tenant, Increment: time.Minute, Capacity: time.Hour}
	w15 := window(tenant, "qrstuvwxyzabcde", 2, 1000, 24*time.Hour)
	w16 := window(tenant, "qrstuvwxyzabcdef", 1, 1000, 24*time.Hour)
	all := []driver.Charge{g15, g16, w15, w16}
	newClaim := func(key string) *driver.Claim {
		return &driver.Claim{Tenant: tenant, SourceID: "github", Key: key, HookID: "h", TTL: time.Hour,
			PendingTTL: time.Minute}
	}
	first := newClaim("first")
	if res := hitConn(t, c, all, first); res.Outcome != driver.OK || res.Buckets[2].Used != 2 ||
		res.Buckets[3].Used != 1 {
		t.Fatalf("first Hit: %v, used %d and %d; want OK, 2 and 1", res.Outcome, res.Buckets[2].Used,
			res.Buckets[3].Used)
	}
	// 20 rounds of 16 one-claim Commits and a Hit of the windows: 320
	// claims, enough for several splits.
	const rounds, per = 20, 16
	for r := range rounds {
		var wg sync.WaitGroup
		for i := range per {
			wg.Go(func() {
				cl := newClaim("k-" + strconv.Itoa(r*per+i))
				if errs, err := c.Commit(gctx(t, 10*time.Second), []driver.Claim{*cl}); err != nil || errs[0] != nil {
					t.Errorf("commit: %v %v", err, errs)
				}
			})
		}
		wg.Go(func() {
			res, err := c.Hit(gctx(t, 10*time.Second), []driver.Charge{w15, w16}, newClaim("h-"+strconv.Itoa(r)))
			if err != nil || res.Outcome != driver.OK {
				t.Errorf("window Hit %d: %v %v", r, res.Outcome, err)
			}
		})
		wg.Wait()
	}
	state, _ := do("HGET", s0, "s").(string)
	if len(state) != 18 || state[1] == 0 {
		t.Fatalf("shard 0's state %x: want a level above 0 (split)", state)
	}
	fields := func() []string {
		t.Helper()
		raw, _ := do("HKEYS", s0).([]any)
		var out []string
		for _, f := range raw {
			s, _ := f.(string)
			out = append(out, s)
		}
		slices.Sort(out)
		return out
	}
	want := []string{"abcdefghijklmno::", "abcdefghijklmnop:", "qrstuvwxyzabcde##", "qrstuvwxyzabcdef#", "s"}
	if got := fields(); !slices.Equal(got, want) {
		t.Errorf("shard 0 of a split tenant holds %q, want %q", got, want)
	}
	res := hitConn(t, c, all, nil)
	if res.Outcome != driver.OK || res.Buckets[2].Used != 2*(rounds+2) || res.Buckets[3].Used != rounds+2 ||
		res.Buckets[0].ResetAfter < 2*time.Minute-time.Minute/2 || res.Buckets[1].ResetAfter < 2*time.Minute-time.Minute/2 {
		t.Errorf("after the splits: %v %+v; want OK, each TAT two increments ahead, used %d and %d",
			res.Outcome, res.Buckets[:4], 2*(rounds+2), rounds+2)
	}
	if err := c.Reset(gctx(t, 10*time.Second), tenant); err != nil {
		t.Fatal(err)
	}
	if got := fields(); !slices.Equal(got, []string{"s"}) {
		t.Errorf("after Reset shard 0 holds %q, want its state alone", got)
	}
	res = hitConn(t, c, all, nil)
	if res.Outcome != driver.OK || res.Buckets[2].Used != 2 || res.Buckets[3].Used != 1 ||
		res.Buckets[0].ResetAfter > time.Minute || res.Buckets[1].ResetAfter > time.Minute {
		t.Errorf("after Reset: %v %+v; want OK, fresh buckets, used 2 and 1", res.Outcome, res.Buckets[:4])
	}
	for _, key := range []string{"first", "k-0", "k-" + strconv.Itoa(rounds*per/2), "k-" + strconv.Itoa(rounds*per-1)} {
		o := newClaim(key)
		o.HookID = "other"
		want := driver.Duplicate
		if key == "first" {
			want = driver.Pending
		}
		if res := hitConn(t, c, nil, o); res.Outcome != want {
			t.Errorf("claim %s after the splits and Reset: %v, want %v", key, res.Outcome, want)
		}
	}
}
