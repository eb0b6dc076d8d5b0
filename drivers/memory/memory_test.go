package memory_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/drivers/memory"
)

// t0 is the injected clock's start, in µs: around today's epoch.
const t0 = int64(1_800_000_000_000_000)

// clock is an injected memory.Clock in µs.
type clock struct{ us atomic.Int64 }

func (c *clock) now() int64              { return c.us.Load() }
func (c *clock) set(us int64)            { c.us.Store(us) }
func (c *clock) advance(d time.Duration) { c.us.Add(d.Microseconds()) }

var schemeSeq atomic.Int64

// fixture is a memory driver on an injected clock, registered under a
// scheme of its own.
type fixture struct {
	clock  *clock
	driver *memory.Driver
	scheme string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	c := &clock{}
	c.set(t0)
	d := memory.New(c.now)
	scheme := fmt.Sprintf("memtest%d", schemeSeq.Add(1))
	fleetstore.Register(scheme, d)
	return &fixture{clock: c, driver: d, scheme: scheme}
}

// records lists tenant's live records under keyPrefix.
func (f *fixture) records(keyPrefix, tenant string) []driver.Record {
	recs, _ := f.driver.Records(context.Background(), keyPrefix, tenant) // never fails
	return recs
}

// open opens scheme://rest, e.g. rest "" or "NAME?key_prefix=p".
func (f *fixture) open(t *testing.T, rest string) *fleetstore.Store {
	t.Helper()
	st, err := fleetstore.Open(f.scheme + "://" + rest)
	if err != nil {
		t.Fatalf("open %s://%s: %v", f.scheme, rest, err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func hit(t *testing.T, st *fleetstore.Store, charges []fleetstore.Charge, claim *fleetstore.Claim) fleetstore.Result {
	t.Helper()
	res, err := st.Hit(context.Background(), charges, claim)
	if err != nil {
		t.Fatalf("hit: %v", err)
	}
	return res
}

// want compares the decision (the bucket states are G10's, checked by
// the conformance suite on this driver's injected clock).
func want(t *testing.T, what string, got, want fleetstore.Result) {
	t.Helper()
	if got.Outcome != want.Outcome || got.HookID != want.HookID || got.RetryAfter != want.RetryAfter || got.Local != want.Local {
		t.Fatalf("%s: got %v %q retry-after %v, want %v %q retry-after %v",
			what, got.Outcome, got.HookID, got.RetryAfter, want.Outcome, want.HookID, want.RetryAfter)
	}
}

func ok() fleetstore.Result { return fleetstore.Result{Outcome: fleetstore.OK} }

func limited(d time.Duration) fleetstore.Result {
	return fleetstore.Result{Outcome: fleetstore.RateLimited, RetryAfter: d}
}

// TestGCRATimeline follows one bucket (increment 100ms, burst 3) on the
// injected clock to the µs: the burst, the retry-after rounded up to the
// ms, conformance exactly at the TAT, and a denial that writes nothing.
func TestGCRATimeline(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	st := f.open(t, "")
	c := []fleetstore.Charge{{Kind: fleetstore.Hooks, Tenant: "acme", Increment: 100 * time.Millisecond, Capacity: 300 * time.Millisecond}}

	for i := 0; i < 3; i++ {
		want(t, fmt.Sprintf("charge %d of the burst", i+1), hit(t, st, c, nil), ok())
	}
	// TAT is t0+300ms: the next would make it 400ms, 100ms over capacity.
	want(t, "charge after the burst", hit(t, st, c, nil), limited(100*time.Millisecond))

	f.clock.set(t0 + 50_001) // wait 49.999ms → 50ms
	want(t, "at +50.001ms", hit(t, st, c, nil), limited(50*time.Millisecond))
	f.clock.set(t0 + 49_999) // wait 50.001ms → 51ms (never rounded down)
	want(t, "at +49.999ms", hit(t, st, c, nil), limited(51*time.Millisecond))
	f.clock.set(t0 + 99_999) // wait 1µs → 1ms
	want(t, "at +99.999ms", hit(t, st, c, nil), limited(time.Millisecond))

	// The denials wrote nothing: the charge conforms exactly at t0+100ms.
	f.clock.set(t0 + 100_000)
	want(t, "at +100ms", hit(t, st, c, nil), ok())
	want(t, "again at +100ms", hit(t, st, c, nil), limited(100*time.Millisecond))

	// A full wait refills the whole burst, no more.
	f.clock.set(t0 + 400_000 + 300_000)
	for i := 0; i < 3; i++ {
		want(t, fmt.Sprintf("refilled charge %d", i+1), hit(t, st, c, nil), ok())
	}
	want(t, "after the refilled burst", hit(t, st, c, nil), limited(100*time.Millisecond))

	// Two charges: RetryAfter is the largest wait, and the bytes bucket is
	// not charged when the hooks bucket denies (all or nothing).
	now := f.clock.now()
	both := []fleetstore.Charge{c[0], {Kind: fleetstore.Bytes, Tenant: "acme", Increment: 2 * time.Second, Capacity: 2 * time.Second}}
	want(t, "hooks full, bytes fresh", hit(t, st, both, nil), limited(100*time.Millisecond))
	f.clock.set(now + 100_000)
	want(t, "both conform", hit(t, st, both, nil), ok())
	want(t, "both denied", hit(t, st, both, nil), limited(2*time.Second))
}

// TestGCRAEpochPrecision: a 125µs increment at a µs-odd time near today's
// epoch (≈ 1.8e15 µs) is exact to the µs.
func TestGCRAEpochPrecision(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	st := f.open(t, "")
	f.clock.set(t0 + 123_457)
	c := []fleetstore.Charge{{Kind: fleetstore.Hooks, Tenant: "acme", Increment: 125 * time.Microsecond, Capacity: 1000 * time.Microsecond}}
	for i := 0; i < 8; i++ {
		want(t, fmt.Sprintf("125µs charge %d", i+1), hit(t, st, c, nil), ok())
	}
	want(t, "ninth 125µs charge", hit(t, st, c, nil), limited(time.Millisecond))
	f.clock.advance(124 * time.Microsecond)
	want(t, "1µs early", hit(t, st, c, nil), limited(time.Millisecond))
	f.clock.advance(time.Microsecond)
	want(t, "exactly 125µs later", hit(t, st, c, nil), ok())
}

func claimFor(hook string) *fleetstore.Claim {
	return &fleetstore.Claim{
		Tenant: "acme", SourceID: "github", Key: "delivery-1", HookID: hook, Node: "edge-1",
		TTL: time.Minute, PendingTTL: 30 * time.Second,
	}
}

// TestPendingExpiry: an unsettled claim frees the key exactly PendingTTL
// after the hit (C9), and Pending's RetryAfter is the remaining pending
// time rounded up to the ms.
func TestPendingExpiry(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	st := f.open(t, "")
	want(t, "hook-a claims", hit(t, st, nil, claimFor("hook-a")), ok())

	pending := func(d time.Duration) fleetstore.Result {
		return fleetstore.Result{Outcome: fleetstore.Pending, RetryAfter: d}
	}
	want(t, "hook-b at once", hit(t, st, nil, claimFor("hook-b")), pending(30*time.Second))
	f.clock.set(t0 + 29_500_000)
	want(t, "hook-b at +29.5s", hit(t, st, nil, claimFor("hook-b")), pending(500*time.Millisecond))
	f.clock.set(t0 + 30_000_000 - 1001)
	want(t, "hook-b 1.001ms before expiry", hit(t, st, nil, claimFor("hook-b")), pending(2*time.Millisecond))
	f.clock.set(t0 + 30_000_000 - 1)
	want(t, "hook-b 1µs before expiry", hit(t, st, nil, claimFor("hook-b")), pending(time.Millisecond))
	// hook-a's retry of its own pending claim is OK and extends nothing.
	want(t, "hook-a retries", hit(t, st, nil, claimFor("hook-a")), ok())

	f.clock.set(t0 + 30_000_000)
	want(t, "hook-b at expiry", hit(t, st, nil, claimFor("hook-b")), ok())
	// The key is now hook-b's: hook-a lost it.
	err := st.Commit(context.Background(), *claimFor("hook-a"))
	if !errors.Is(err, fleetstore.ErrClaimLost) {
		t.Fatalf("commit by hook-a after its claim expired: %v, want ErrClaimLost", err)
	}
}

// TestCommittedExpiry: a committed claim lasts TTL from the commit, not
// from the hit (C9).
func TestCommittedExpiry(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	st := f.open(t, "")
	want(t, "hook-a claims", hit(t, st, nil, claimFor("hook-a")), ok())
	f.clock.set(t0 + 10_000_000)
	if err := st.Commit(context.Background(), *claimFor("hook-a")); err != nil {
		t.Fatalf("commit: %v", err)
	}
	dup := fleetstore.Result{Outcome: fleetstore.Duplicate, HookID: "hook-a"}
	f.clock.set(t0 + 60_000_000) // TTL from the hit: still committed
	want(t, "hook-b a minute after the hit", hit(t, st, nil, claimFor("hook-b")), dup)
	f.clock.set(t0 + 70_000_000 - 1)
	want(t, "hook-b 1µs before expiry", hit(t, st, nil, claimFor("hook-b")), dup)
	f.clock.set(t0 + 70_000_000)
	want(t, "hook-b at expiry", hit(t, st, nil, claimFor("hook-b")), ok())
}

// TestRecordsLive: Records reports live records only, with exact TTLs.
func TestRecordsLive(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	st := f.open(t, "records")
	c := []fleetstore.Charge{{Kind: fleetstore.Hooks, Tenant: "acme", Increment: 100 * time.Millisecond, Capacity: time.Second}}
	want(t, "hit", hit(t, st, c, claimFor("hook-a")), ok())
	f.clock.advance(10 * time.Millisecond)

	got := f.records(fleetstore.DefaultKeyPrefix, "acme")
	slices.SortFunc(got, func(a, b driver.Record) int { return cmpString(a.Key, b.Key) })
	wantRecs := []driver.Record{
		{Key: "bucket", TTL: 90 * time.Millisecond},
		{Key: "claim/github/delivery-1", TTL: 29990 * time.Millisecond},
	}
	if !slices.Equal(got, wantRecs) {
		t.Fatalf("records at +10ms: %+v, want %+v", got, wantRecs)
	}
	if other := f.records("other-prefix", "acme"); len(other) != 0 {
		t.Fatalf("records under another key_prefix: %+v, want none", other)
	}
	if other := f.records(fleetstore.DefaultKeyPrefix, "acme2"); len(other) != 0 {
		t.Fatalf("records of another tenant: %+v, want none", other)
	}

	// The bucket expires at its TAT, the claim at PendingTTL; neither is
	// swept yet (no writes since), so Size still counts what Records hides.
	f.clock.set(t0 + 100_000)
	got = f.records(fleetstore.DefaultKeyPrefix, "acme")
	if len(got) != 1 || got[0].Key != "claim/github/delivery-1" {
		t.Fatalf("records at the bucket's TAT: %+v, want only the claim", got)
	}
	f.clock.set(t0 + 30_000_000)
	if got := f.records(fleetstore.DefaultKeyPrefix, "acme"); len(got) != 0 {
		t.Fatalf("records after every expiry: %+v, want none", got)
	}
	if b, cl := f.driver.Size("records", fleetstore.DefaultKeyPrefix); b != 1 || cl != 1 {
		t.Fatalf("size before any sweep: %d buckets, %d claims, want 1 and 1", b, cl)
	}

	// A committed claim's TTL runs from the commit.
	if err := st.Commit(context.Background(), *claimFor("hook-a")); err != nil {
		t.Fatalf("commit: %v", err)
	}
	f.clock.advance(time.Second)
	got = f.records(fleetstore.DefaultKeyPrefix, "acme")
	if len(got) != 1 || got[0] != (driver.Record{Key: "claim/github/delivery-1", TTL: 59 * time.Second}) {
		t.Fatalf("records 1s after commit: %+v, want the claim with 59s left", got)
	}
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// TestNamedStores: memory://NAME shares state between Stores of one
// process; memory:// does not; another key_prefix under the same NAME does
// not.
func TestNamedStores(t *testing.T) {
	t.Parallel()
	one := []fleetstore.Charge{{Kind: fleetstore.Hooks, Tenant: "acme", Increment: time.Hour, Capacity: time.Hour}}
	tests := []struct {
		name       string
		a, b       string
		wantShared bool
	}{
		{name: "same name", a: "fleet", b: "fleet", wantShared: true},
		{name: "same name, explicit default prefix", a: "fleet", b: "fleet?key_prefix=fleetstore", wantShared: true},
		{name: "same name and prefix", a: "fleet?key_prefix=p1", b: "fleet?key_prefix=p1&timeout=1s", wantShared: true},
		{name: "private", a: "", b: "", wantShared: false},
		{name: "private and slash", a: "/", b: "", wantShared: false},
		{name: "other names", a: "fleet", b: "other", wantShared: false},
		{name: "named and private", a: "fleet", b: "", wantShared: false},
		{name: "same name, other prefix", a: "fleet?key_prefix=p1", b: "fleet?key_prefix=p2", wantShared: false},
		{name: "same name, default and other prefix", a: "fleet", b: "fleet?key_prefix=p2", wantShared: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			a, b := f.open(t, tt.a), f.open(t, tt.b)
			want(t, "first charge on a", hit(t, a, one, nil), ok())
			res := hit(t, b, one, nil)
			if shared := res.Outcome == fleetstore.RateLimited; shared != tt.wantShared {
				t.Fatalf("%s://%s then %s://%s: second charge %v, want shared=%v", f.scheme, tt.a, f.scheme, tt.b, res.Outcome, tt.wantShared)
			}
			// Claims follow the same rule.
			cl := claimFor("hook-a")
			want(t, "claim on a", hit(t, a, nil, cl), ok())
			res = hit(t, b, nil, claimFor("hook-b"))
			if shared := res.Outcome == fleetstore.Pending; shared != tt.wantShared {
				t.Fatalf("claim on b: %v, want shared=%v", res.Outcome, tt.wantShared)
			}
		})
	}
}

// TestNamedLifetime: memory://NAME lives while a Store is open on it and
// is forgotten with the last one (no state leaks per name).
func TestNamedLifetime(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.open(t, "fleet")
	b := f.open(t, "fleet")
	want(t, "claim on a", hit(t, a, nil, claimFor("hook-a")), ok())
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	want(t, "claim on b after a closed", hit(t, b, nil, claimFor("hook-b")),
		fleetstore.Result{Outcome: fleetstore.Pending, RetryAfter: 30 * time.Second})
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	c := f.open(t, "fleet")
	want(t, "claim on a new store after every store closed", hit(t, c, nil, claimFor("hook-c")), ok())
}

// TestOpenParams: only the common parameters are accepted, and a path or a
// user is refused.
func TestOpenParams(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, rest := range []string{"?foo=1", "NAME?timeout=1s&foo=1", "NAME/path", "user@NAME", "user:pw@NAME"} {
		st, err := fleetstore.Open(f.scheme + "://" + rest)
		if !errors.Is(err, fleetstore.ErrInvalid) {
			if st != nil {
				st.Close()
			}
			t.Errorf("open %s://%s: %v, want ErrInvalid", f.scheme, rest, err)
		}
	}
	for _, rest := range []string{"", "/", "NAME", "NAME/", "?timeout=5ms&key_prefix=x"} {
		st, err := fleetstore.Open(f.scheme + "://" + rest)
		if err != nil {
			t.Errorf("open %s://%s: %v", f.scheme, rest, err)
			continue
		}
		st.Close()
	}
}

// TestBounded streams 200 000 fresh tenants, each with a bucket and a
// claim of short TTLs, while the injected clock advances 10µs per hit: at
// any time about 1 000 claims and 100 buckets are live. The store must
// sweep the rest: its size stays a small multiple of the live set.
func TestBounded(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	st := f.open(t, "bounded")
	const (
		hits  = 200_000
		step  = 10 * time.Microsecond
		live  = 10*time.Millisecond/step + time.Millisecond/step // claims + buckets
		bound = 4*int(live) + 3*64*64                            // sweep slack: a few times the live set, plus a floor per shard
	)
	ctx := context.Background()
	maxSize := 0
	for i := 0; i < hits; i++ {
		tenant := fmt.Sprintf("tenant-%d", i)
		c := []fleetstore.Charge{{Kind: fleetstore.Hooks, Tenant: tenant, Increment: time.Millisecond, Capacity: time.Millisecond}}
		cl := &fleetstore.Claim{Tenant: tenant, SourceID: "s", Key: fmt.Sprintf("k-%d", i), HookID: "h",
			TTL: 10 * time.Millisecond, PendingTTL: 10 * time.Millisecond}
		res, err := st.Hit(ctx, c, cl)
		if err != nil || res.Outcome != fleetstore.OK {
			t.Fatalf("hit %d: %v %v", i, res.Outcome, err)
		}
		if i%3 == 0 {
			// A third are committed: the claim is rewritten, TTL from now.
			if err := st.Commit(ctx, *cl); err != nil {
				t.Fatalf("commit %d: %v", i, err)
			}
		}
		f.clock.advance(step)
		if i%1000 == 999 {
			b, c := f.driver.Size("bounded", fleetstore.DefaultKeyPrefix)
			maxSize = max(maxSize, b+c)
			if b+c > bound {
				t.Fatalf("after %d hits: %d buckets + %d claims held, want at most %d (about %d live)", i+1, b, c, bound, live)
			}
		}
	}
	t.Logf("largest size %d (bound %d, live ≈ %d)", maxSize, bound, live)
	// Only live records are reported: the last tenant's, not the first's.
	f.clock.advance(time.Millisecond)
	if recs := f.records(fleetstore.DefaultKeyPrefix, "tenant-0"); len(recs) != 0 {
		t.Errorf("records of the first tenant, long expired: %+v", recs)
	}
	if recs := f.records(fleetstore.DefaultKeyPrefix, fmt.Sprintf("tenant-%d", hits-1)); len(recs) != 1 {
		t.Errorf("records of the last tenant: %+v, want its claim only (its bucket expired 1ms after the hit, the claim expires after 10ms)", recs)
	}
}

// TestForget: Forget deletes claims of a named store held by their own
// hook, pending or committed, and nothing else: not another hook's claim,
// not a bucket, not a claim of another store.
func TestForget(t *testing.T) {
	f := newFixture(t)
	st := f.open(t, "forget?key_prefix=p")
	other := f.open(t, "forget-other?key_prefix=p")
	ctx := context.Background()
	claim := func(key, hook string) fleetstore.Claim {
		return fleetstore.Claim{Tenant: "acme", SourceID: "github", Key: key, HookID: hook, TTL: time.Hour, PendingTTL: time.Hour}
	}
	pending, committed, theirs := claim("pending", "h-1"), claim("committed", "h-2"), claim("theirs", "h-3")
	charge := fleetstore.Charge{Kind: fleetstore.Hooks, Tenant: "acme", Increment: time.Second, Capacity: time.Hour}
	hit(t, st, []fleetstore.Charge{charge}, &pending)
	hit(t, st, nil, &theirs)
	hit(t, other, nil, &pending)
	if err := st.Commit(ctx, committed); err != nil {
		t.Fatal(err)
	}
	notMine := claim("theirs", "h-9")
	if n := f.driver.Forget("forget", "p", pending, committed, notMine, claim("absent", "h-1")); n != 2 {
		t.Errorf("Forget deleted %d claims, want 2 (the pending and the committed one of their own hooks)", n)
	}
	for _, c := range []fleetstore.Claim{pending, committed} {
		again := c
		again.HookID = "h-new"
		want(t, "a forgotten claim's key", hit(t, st, nil, &again), ok())
	}
	intruder := claim("theirs", "h-4")
	if res := hit(t, st, nil, &intruder); res.Outcome != fleetstore.Pending {
		t.Errorf("another hook's claim was forgotten: %+v", res)
	}
	if res := hit(t, other, nil, &intruder); res.Outcome != fleetstore.OK {
		t.Fatalf("other store: %+v", res)
	}
	again := claim("pending", "h-new")
	if res := hit(t, other, nil, &again); res.Outcome != fleetstore.Pending {
		t.Errorf("Forget reached another store: %+v", res)
	}
	if recs, _ := f.driver.Records(context.Background(), "p", "acme"); !slices.ContainsFunc(recs, func(r driver.Record) bool { return r.Key == "bucket" }) {
		t.Errorf("Forget took the bucket: %+v", recs)
	}
	if n := f.driver.Forget("no-such-store", "p", pending); n != 0 {
		t.Errorf("Forget on an unknown store: %d", n)
	}
}

// TestQuota: Driver.Quota reports each bucket's reset-after as it stands,
// writing nothing, and full buckets for a store not open or a kind never
// charged (G10).
func TestQuota(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	st := f.open(t, "quota?key_prefix=q")
	hooks := fleetstore.Charge{Kind: fleetstore.Hooks, Tenant: "acme", Increment: 100 * time.Millisecond, Capacity: time.Second}
	never := fleetstore.Charge{Kind: "never", Tenant: "acme", Increment: time.Second, Capacity: time.Second}
	hit(t, st, []fleetstore.Charge{hooks}, nil)
	f.clock.set(t0 + 30_000)
	for range 2 { // twice: Quota wrote nothing
		var r driver.Result
		f.driver.Quota("quota", "q", []driver.Charge{hooks, never}, &r)
		if r.NBuckets != 2 || r.Buckets[0].ResetAfter != 70*time.Millisecond || r.Buckets[1].ResetAfter != 0 {
			t.Fatalf("Quota: %+v, want reset-after 70ms and 0", r.Quota())
		}
	}
	var r driver.Result
	r.Buckets[3].ResetAfter = time.Hour
	f.driver.Quota("not-open", "q", []driver.Charge{hooks}, &r)
	if r.NBuckets != 1 || r.Buckets[0].ResetAfter != 0 || r.Buckets[3].ResetAfter != 0 {
		t.Errorf("Quota of a store not open: %+v", r)
	}
}

// TestZeroDriver: the zero memory.Driver opens nothing, with ErrInvalid
// naming it, and panics on nothing (Open, OpenDriver, Records).
func TestZeroDriver(t *testing.T) {
	t.Parallel()
	var d memory.Driver
	if _, err := d.Open(driver.Config{KeyPrefix: "p", Timeout: time.Second}); !errors.Is(err, driver.ErrInvalid) {
		t.Errorf("Open of the zero Driver: %v, want ErrInvalid", err)
	}
	if st, err := fleetstore.OpenDriver(&d, "memory://"); !errors.Is(err, fleetstore.ErrInvalid) {
		t.Errorf("OpenDriver of the zero Driver: %v %v, want ErrInvalid", st, err)
	}
	if recs, err := d.Records(context.Background(), "p", "t"); recs != nil || err != nil {
		t.Errorf("Records of the zero Driver: %v %v, want none", recs, err)
	}
}
