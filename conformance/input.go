package conformance

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"time"

	"github.com/fleetstore/fleetstore"
	"github.com/fleetstore/fleetstore/driver"
	"github.com/fleetstore/fleetstore/nettest"
)

func init() {
	register("V1", "bad input is ErrInvalid naming the field, and nothing is written", testV1)
	register("V2", "any bytes are a valid tenant, source or key; keys are encoded injectively",
		testV2)
	register("V3", "long and unsafe parts (1 KB, spaces, control characters) work end to end", testV3)
	register("V4", "a malformed reply from the server is an error value, never a panic", testV4)
}

func testV1(t *clauseT) {
	st := t.open()
	tenant := t.tenant()
	good := charge(fleetstore.Hooks, tenant, time.Hour, time.Hour) // one unit: any write shows
	claim := t.claimFor(tenant, "hook-a")
	long := strings.Repeat("x", 1025)
	day := 24 * time.Hour
	type hitCase struct {
		field   string
		charges []fleetstore.Charge
		claim   func(c *fleetstore.Claim)
	}
	with := func(f func(c *fleetstore.Charge)) []fleetstore.Charge {
		c := good
		f(&c)
		return []fleetstore.Charge{c}
	}
	// withWindow returns a window charge of one unit of one (CONTRACT
	// §3.2), changed by f: any write shows.
	withWindow := func(f func(w *driver.Window)) []fleetstore.Charge {
		c := window("quota", tenant, 1, 1, windowsFrom(t.now().Add(-time.Minute), 2*time.Minute))
		f(&c.Window)
		return []fleetstore.Charge{c}
	}
	// kinds returns n charges of distinct kinds, one unit each.
	kinds := func(n int) []fleetstore.Charge {
		out := make([]fleetstore.Charge, n)
		for i := range out {
			out[i] = charge(fleetstore.Kind(fmt.Sprintf("k%d", i)), tenant, time.Hour, time.Hour)
		}
		return out
	}
	cases := []hitCase{
		{"charges", kinds(fleetstore.MaxCharges + 1), nil},
		{"charges[0].kind", with(func(c *fleetstore.Charge) { c.Kind = "" }), nil},
		{"charges[0].kind", with(func(c *fleetstore.Charge) { c.Kind = "Hooks" }), nil},
		{"charges[0].kind", with(func(c *fleetstore.Charge) { c.Kind = "9hooks" }), nil},
		{"charges[0].kind", with(func(c *fleetstore.Charge) { c.Kind = "a-b" }), nil},
		{"charges[0].kind", with(func(c *fleetstore.Charge) {
			c.Kind = fleetstore.Kind("k" + strings.Repeat("x", 32))
		}), nil},
		{"charges[0].tenant", with(func(c *fleetstore.Charge) { c.Tenant = "" }), nil},
		{"charges[0].tenant", with(func(c *fleetstore.Charge) { c.Tenant = long }), nil},
		{"charges[0].increment", with(func(c *fleetstore.Charge) { c.Increment = 0 }), nil},
		{"charges[0].increment", with(func(c *fleetstore.Charge) { c.Increment = -time.Second }), nil},
		{"charges[0].increment",
			with(func(c *fleetstore.Charge) { c.Increment = 999 * time.Nanosecond }), nil},
		{"charges[0].capacity", with(func(c *fleetstore.Charge) { c.Capacity = 367 * day }), nil},
		{"charges[0].capacity", with(func(c *fleetstore.Charge) { c.Capacity = -time.Second }), nil},
		{"charges[1].tenant", []fleetstore.Charge{good,
			charge(fleetstore.Bytes, "other", time.Second, time.Second)}, nil},
		{"charges[1].kind", []fleetstore.Charge{good, good}, nil},
		{"charges[0].window.max", withWindow(func(w *driver.Window) { w.Max = -1 }), nil},
		{"charges[0].window.max", withWindow(func(w *driver.Window) { w.Max = driver.MaxWindowUnits + 1 }), nil},
		{"charges[0].window.cost", withWindow(func(w *driver.Window) { w.Cost = 0 }), nil},
		{"charges[0].window.edges", withWindow(func(w *driver.Window) { w.Edges[2] = w.Edges[1] }), nil},
		{"charges[0].window.edges", withWindow(func(w *driver.Window) { w.Edges = [4]int64{} }), nil},
		{"charges[0].increment", func() []fleetstore.Charge {
			c := withWindow(func(*driver.Window) {})
			c[0].Increment = time.Second
			return c
		}(), nil},
		{"claim.tenant", nil, func(c *fleetstore.Claim) { c.Tenant = "" }},
		{"claim.tenant", nil, func(c *fleetstore.Claim) { c.Tenant = long }},
		{"claim.tenant", []fleetstore.Charge{good}, func(c *fleetstore.Claim) { c.Tenant = "other" }},
		{"claim.source_id", nil, func(c *fleetstore.Claim) { c.SourceID = "" }},
		{"claim.source_id", nil, func(c *fleetstore.Claim) { c.SourceID = long }},
		{"claim.key", nil, func(c *fleetstore.Claim) { c.Key = "" }},
		{"claim.key", nil, func(c *fleetstore.Claim) { c.Key = long }},
		{"claim.hook_id", nil, func(c *fleetstore.Claim) { c.HookID = "" }},
		{"claim.hook_id", nil, func(c *fleetstore.Claim) { c.HookID = strings.Repeat("h", 257) }},
		{"claim.node", nil, func(c *fleetstore.Claim) { c.Node = strings.Repeat("n", 257) }},
		{"claim.ttl", nil, func(c *fleetstore.Claim) { c.TTL = 0 }},
		{"claim.ttl", nil, func(c *fleetstore.Claim) { c.TTL = 999 * time.Microsecond }},
		{"claim.ttl", nil, func(c *fleetstore.Claim) { c.TTL = 367 * day }},
		{"claim.pending_ttl", nil, func(c *fleetstore.Claim) { c.PendingTTL = -time.Second }},
		{"claim.pending_ttl", nil, func(c *fleetstore.Claim) { c.PendingTTL = 367 * day }},
	}
	for i, tc := range cases {
		charges := tc.charges
		if charges == nil {
			charges = []fleetstore.Charge{good}
		}
		var cp *fleetstore.Claim
		if tc.claim != nil {
			c := claim
			tc.claim(&c)
			cp = &c
		}
		_, err := st.Hit(t.ctx(), charges, cp)
		t.wantField(fmt.Sprintf("hit case %d", i), err, tc.field)
	}
	bad := claim
	bad.Key = ""
	t.wantField("commit", st.Commit(t.ctx(), claim, bad), "claims[1].key")
	t.wantField("release", st.Release(t.ctx(), bad), "claims[0].key")
	t.wantField("reset", st.Reset(t.ctx(), ""), "tenant")
	t.wantField("reset", st.Reset(t.ctx(), long), "tenant")
	// Peek's, checked before whether the driver can peek (G11).
	hooks := peekLimits.hooks
	five := make([]fleetstore.Limit, fleetstore.MaxCharges+1)
	for i := range five {
		kind := fleetstore.Kind(fmt.Sprintf("k%d", i))
		five[i] = fleetstore.MustLimit(fleetstore.PerSecond(kind, 1, 1))
	}
	for _, tc := range []struct {
		field  string
		tenant string
		limits []fleetstore.Limit
	}{
		{"tenant", "", []fleetstore.Limit{hooks}}, {"tenant", long, []fleetstore.Limit{hooks}},
		{"limits", tenant, five}, {"limits[1]", tenant, []fleetstore.Limit{hooks, {}}},
		{"limits[1].kind", tenant, []fleetstore.Limit{hooks, hooks}},
	} {
		_, err := st.Peek(t.ctx(), tc.tenant, tc.limits...)
		t.wantField("peek", err, tc.field)
	}

	// Nothing was written by any of them: the bucket's one unit is there
	// and the claim is free (the batch commit did not commit its good one).
	t.want("claim after the rejected calls",
		t.hit(st, []fleetstore.Charge{good}, other(claim, "hook-b")), fleetstore.OK)
	t.want("a window of one unit after the rejected calls",
		t.hit(st, withWindow(func(*driver.Window) {}), nil), fleetstore.OK)

	// The limits themselves are valid.
	edge := fleetstore.Claim{
		Tenant: strings.Repeat("t", 1024), SourceID: strings.Repeat("s", 1024),
		Key: strings.Repeat("k", 1024), HookID: strings.Repeat("h", 256),
		Node: strings.Repeat("n", 256), TTL: 366 * day, PendingTTL: time.Millisecond,
	}
	kind := fleetstore.Kind("k" + strings.Repeat("_", 31))
	largest := []fleetstore.Charge{charge(kind, edge.Tenant, time.Microsecond, 366*day)}
	t.want("the largest valid values", t.hit(st, largest, &edge), fleetstore.OK)
	edge.Node = ""
	t.commit(st, edge)
	most := t.hit(st, kinds(fleetstore.MaxCharges), nil)
	t.want(fmt.Sprintf("%d charges (the most of one Hit)", fleetstore.MaxCharges), most,
		fleetstore.OK)
	if n := len(most.Quota()); n != fleetstore.MaxCharges {
		t.Errorf("%d charges: %d bucket states, want %d (G10)", fleetstore.MaxCharges, n,
			fleetstore.MaxCharges)
	}
	if res := t.hit(st, nil, nil); res.Outcome != fleetstore.OK {
		t.Errorf("a Hit with no charges and no claim: got %s, want OK", describe(res))
	}
}

func (t *clauseT) wantField(what string, err error, field string) {
	if !errors.Is(err, fleetstore.ErrInvalid) {
		t.Errorf("%s: bad %s: got %v, want ErrInvalid", what, field, err)
		return
	}
	if !strings.Contains(err.Error(), field) {
		t.Errorf("%s: error %q does not name the field %q", what, err, field)
	}
}

// oddParts are strings that a naive key encoding would confuse.
var oddParts = []string{
	"a", "a:b", "b:c", "a:b:c", ":", "::", "{a}", "a}", "{", "}", "{}", "a b", "a\nb", "a\x00b",
	"a\x00", "\x00", "a\r\nb", "\xff\xfe", "ü", "%", "%3A", "a/b", "a\\b", " ", "\t",
}

func testV2(t *clauseT) {
	st := t.open()
	run := randHex(4)
	type triple struct{ tenant, source, key string }
	var claims []triple
	// Pairs that collide under "tenant:source:key".
	for _, p := range []triple{
		{"a:b", "c", "k"}, {"a", "b:c", "k"}, {"a", "b", "c:k"}, {"a:b:c", "k", "x"},
		{"{a}", "s", "k"}, {"a", "s", "k"}, {"a}", "s", "k"}, {"{a", "}s", "k"},
		{"a\x00b", "s", "k"}, {"a", "b\x00s", "k"}, {"a b", "s", "k"}, {"a\nb", "s", "k"},
		{"x", "y", "z\x00"}, {"x", "y", "z"}, {"x", "y\x00z", "w"}, {"x", "y", "\x00z"},
	} {
		claims = append(claims, triple{run + p.tenant, p.source, p.key})
	}
	for _, a := range oddParts {
		claims = append(claims, triple{run + a, a, a})
	}
	for i, c := range claims {
		cl := fleetstore.Claim{Tenant: c.tenant, SourceID: c.source, Key: c.key,
			HookID: fmt.Sprintf("hook-%d", i), TTL: time.Hour, PendingTTL: time.Hour}
		res := t.hit(st, nil, &cl)
		if res.Outcome != fleetstore.OK {
			t.Fatalf("claim %d (tenant %q, source %q, key %q) on its first hit: got %s: its key met "+
				"another claim's", i, c.tenant, c.source, c.key, describe(res))
		}
		t.commit(st, cl)
	}
	for i, c := range claims {
		cl := fleetstore.Claim{Tenant: c.tenant, SourceID: c.source, Key: c.key, HookID: "hook-other",
			TTL: time.Hour, PendingTTL: time.Hour}
		res := t.hit(st, nil, &cl)
		if res.Outcome != fleetstore.Duplicate || res.HookID != fmt.Sprintf("hook-%d", i) {
			t.Errorf("claim %d (tenant %q, source %q, key %q): got %s, want duplicate by hook-%d", i,
				c.tenant, c.source, c.key, describe(res), i)
		}
	}
	// Buckets: each odd tenant drains its own bucket only.
	for _, a := range append(oddParts, "a:", "a::", "") {
		tenant := run + "-b" + a
		c := charge(fleetstore.Hooks, tenant, time.Hour, time.Hour)
		t.want(fmt.Sprintf("first charge of tenant %q", tenant), t.hit(st, []fleetstore.Charge{c}, nil),
			fleetstore.OK)
		t.want(fmt.Sprintf("second charge of tenant %q", tenant), t.hit(st, []fleetstore.Charge{c}, nil),
			fleetstore.RateLimited)
	}
}

func testV3(t *clauseT) {
	st := t.open()
	rng := rand.New(rand.NewPCG(1, 2))
	unsafe := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		// Make sure the protocol-breaking bytes are in every one.
		copy(b, " \r\n\x00flush_all\r\n{}:")
		return string(b)
	}
	tenant := unsafe(1024)
	utf8 := strings.Repeat("ü€𝄞", 1024)[:1024] // cut mid-rune on purpose: any bytes
	for i, c := range []fleetstore.Claim{
		{Tenant: tenant, SourceID: unsafe(1024), Key: unsafe(1024)},
		{Tenant: tenant, SourceID: utf8, Key: utf8},
		{Tenant: tenant, SourceID: strings.Repeat("s", 1024), Key: strings.Repeat("k", 1023) + "a"},
		// differs in the last byte only
		{Tenant: tenant, SourceID: strings.Repeat("s", 1024), Key: strings.Repeat("k", 1023) + "b"},
		{Tenant: tenant, SourceID: "s p a c e s", Key: "\x01\x02\x7f control"},
	} {
		c.HookID, c.Node = fmt.Sprintf("hook-%d", i), "node with spaces\n"
		c.TTL, c.PendingTTL = time.Hour, time.Hour
		t.want(fmt.Sprintf("claim %d first hit", i), t.hit(st, nil, &c), fleetstore.OK)
		t.commit(st, c)
		res := t.hit(st, nil, other(c, "hook-other"))
		t.want(fmt.Sprintf("claim %d after commit", i), res, fleetstore.Duplicate)
		if res.HookID != c.HookID {
			t.Errorf("claim %d: duplicate names %q, want %q", i, res.HookID, c.HookID)
		}
	}
	c := charge(fleetstore.Hooks, tenant, time.Hour, time.Hour)
	t.want("1 KB binary tenant, first charge", t.hit(st, []fleetstore.Charge{c}, nil), fleetstore.OK)
	t.want("1 KB binary tenant, second charge", t.hit(st, []fleetstore.Charge{c}, nil),
		fleetstore.RateLimited)
	if err := st.Reset(t.ctx(), tenant); err != nil {
		t.Fatalf("reset of a 1 KB binary tenant: %v", err)
	}
	t.want("1 KB binary tenant after reset", t.hit(st, []fleetstore.Charge{c}, nil), fleetstore.OK)
}

func testV4(t *clauseT) {
	if t.s.cfg.AddrURL == nil {
		t.Skipf("no host:port in the URL and no Config.AddrURL: " +
			"the driver has no server to speak nonsense")
	}
	rng := rand.New(rand.NewPCG(3, 4))
	noise := make([]byte, 512)
	for i := range noise {
		noise[i] = byte(rng.IntN(256))
	}
	const budget = stallBudget
	for _, reply := range [][]byte{
		[]byte("-ERR garbage\r\n"),
		[]byte("+OK\r\n"),
		[]byte(":99\r\n"),
		[]byte("*1\r\n$3\r\nfoo\r\n"),
		[]byte("*3\r\n:99\r\n:-5\r\n$2\r\nxx\r\n"),
		[]byte("*2\r\n:1\r\n*1\r\n:1\r\n"),
		[]byte("$-1\r\n"),
		[]byte("VALUE x 0 5\r\nab\r\nEND\r\n"),
		[]byte("ERROR\r\nSTORED\r\nEXISTS\r\n"),
		noise,
		// Lengths a client must not trust: it would allocate what they
		// declare, overflow its stack on the nesting, or panic on the sign.
		[]byte("$2147483647\r\n"),
		[]byte("*2147483647\r\n"),
		[]byte("%1073741823\r\n"),
		[]byte("$-5\r\n"),
		[]byte("*-3\r\n"),
		[]byte(strings.Repeat("*1\r\n", 100000)),
		[]byte("VALUE x 0 2147483647 1\r\n"),
		[]byte("VALUE x 0 -1 1\r\n"),
	} {
		st := t.openURL(t.addrURL(nettest.NewGarbage(t, reply).Addr()), fleetstore.WithTimeout(budget))
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for _, o := range t.ops(t.tenant()) {
			// V4 runs beside every other clause that runs at once, its
			// configuration's and others': T4's slack under 50 calls, and
			// a call over it is tried once more before it counts.
			var err error
			var d time.Duration
			for range 2 {
				start := time.Now()
				err = o.call(context.Background(), st)
				if d = time.Since(start); d <= budget+10*time.Millisecond+schedSlack*3 {
					break
				}
			}
			if d > budget+10*time.Millisecond+schedSlack*3 {
				t.Errorf("%s against a server replying %.20q took %v twice, budget %v",
					o.name, reply, d, budget)
			}
			if o.name == "hit" && err == nil {
				t.Errorf("hit against a server replying %.20q: no error", reply)
			}
		}
		runtime.ReadMemStats(&after)
		// Process-wide, so other clauses count too: far above what they
		// allocate meanwhile, far below what a declared length asks for.
		if n := after.TotalAlloc - before.TotalAlloc; n > maxHostileAlloc {
			t.Errorf("calls against a server replying %.20q allocated %d MiB: the driver allocated "+
				"what the server declared", reply, n>>20)
		}
	}
}

// maxHostileAlloc bounds what the calls against one lying server may
// allocate (V4).
const maxHostileAlloc = 256 << 20
