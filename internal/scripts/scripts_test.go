package scripts

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore/driver"
)

func TestEncodeInjective(t *testing.T) {
	t.Parallel()
	parts := []string{"a", "a:b", "a%3Ab", "{x}", "}", "{", "%", "%25", "\x00", "\n", "é", "a b", "A", "~._-", "c"}
	seen := map[string]string{}
	for _, p := range parts {
		e := Encode(p)
		if strings.ContainsAny(e, ":{}") {
			t.Errorf("Encode(%q) = %q holds a separator or a brace", p, e)
		}
		if other, ok := seen[e]; ok {
			t.Errorf("Encode(%q) = Encode(%q) = %q", p, other, e)
		}
		seen[e] = p
	}
	// Tenant "a:b" + source "c" never meets tenant "a" + source "b:c" (V2).
	if ClaimKey("p", "a:b", "c", "k") == ClaimKey("p", "a", "b:c", "k") {
		t.Fatal("claim keys collide")
	}
	// The hash tag is the encoded tenant, and the same for every key.
	for _, k := range []string{ShardKey("p", "t}{x", 0), ClaimKey("p", "t}{x", "s}", "{k")} {
		open := strings.IndexByte(k, '{')
		end := strings.IndexByte(k[open:], '}')
		if tag := k[open+1 : open+end]; tag != Encode("t}{x") {
			t.Errorf("key %q has hash tag %q", k, tag)
		}
	}
}

func TestHitCall(t *testing.T) {
	t.Parallel()
	charges := []driver.Charge{
		{Kind: "hooks", Tenant: "t", Increment: 125 * time.Microsecond, Capacity: time.Second},
		{Kind: "bytes", Tenant: "t", Increment: 1900 * time.Millisecond, Capacity: 366 * 24 * time.Hour},
	}
	cl := &driver.Claim{Tenant: "t", SourceID: "s", Key: "k", HookID: "h", Node: "n", TTL: time.Hour, PendingTTL: 1500 * time.Microsecond}
	keys, args := HitCall("p", charges, cl)
	d := ClaimDigest("s", "k")
	if want := []string{"p:{t}:s0", "p:{t}" + string(d[:])}; strings.Join(keys, " ") != strings.Join(want, " ") {
		t.Errorf("keys %q, want %q", keys, want)
	}
	want := []string{"2", "hooks:", "125", "1000000", "bytes:", "1900000", "31622400000000", "h", "1500"}
	if strings.Join(args, " ") != strings.Join(want, " ") {
		t.Errorf("args %q, want %q", args, want)
	}
	keys, args = HitCall("p", nil, cl)
	if len(keys) != 2 || strings.Join(args, " ") != "0 h 1500" {
		t.Errorf("claim only: %q %q", keys, args)
	}
	keys, args = HitCall("p", charges[:1], nil)
	if len(keys) != 1 || len(args) != 4 {
		t.Errorf("charge only: %q %q", keys, args)
	}
}

// TestClaimDigest: the digest of (source, key) tells apart every split of
// the same bytes between source and key (the length prefix), and a claim
// key is the tenant's tag and 16 bytes, however long source and key.
func TestClaimDigest(t *testing.T) {
	t.Parallel()
	pairs := [][2]string{{"ab", "c"}, {"a", "bc"}, {"", "abc"}, {"abc", ""}, {"a\x00", "b"}, {"a", "\x00b"},
		{"\x01a", ""}, {"", "\x01a"}, {strings.Repeat("s", 200), "k"}, {strings.Repeat("s", 199), "sk"}}
	seen := map[[DigestSize]byte][2]string{}
	for _, p := range pairs {
		d := ClaimDigest(p[0], p[1])
		if other, ok := seen[d]; ok {
			t.Errorf("ClaimDigest%q = ClaimDigest%q", p, other)
		}
		seen[d] = p
	}
	long := ClaimKey("p", "t", strings.Repeat("s", 256), strings.Repeat("k", 1024))
	if want := len("p:{t}") + DigestSize; len(long) != want || !strings.HasPrefix(long, TenantTag("p", "t")) {
		t.Errorf("claim key of %d bytes, want %d under the tenant's tag", len(long), want)
	}
}

func TestDecodeHit(t *testing.T) {
	t.Parallel()
	withResets := func(r driver.Result, us ...time.Duration) driver.Result {
		r.NBuckets = len(us)
		for i, d := range us {
			r.Buckets[i].ResetAfter = d * time.Microsecond
		}
		return r
	}
	good := []struct {
		give any
		n    int
		want driver.Result
	}{
		{[]any{int64(1), int64(0)}, 0, driver.Result{Outcome: driver.OK}},
		{[]any{int64(1), int64(0), int64(1000000), int64(0)}, 2, withResets(driver.Result{Outcome: driver.OK}, 1000000, 0)},
		{[]any{int64(2), "hook"}, 0, driver.Result{Outcome: driver.Duplicate, HookID: "hook"}},
		{[]any{int64(2), "hook", int64(5)}, 1, withResets(driver.Result{Outcome: driver.Duplicate, HookID: "hook"}, 5)},
		{[]any{int64(3), int64(7)}, 0, driver.Result{Outcome: driver.Pending, RetryAfter: 7 * time.Millisecond}},
		{[]any{int64(4), int64(1), int64(31622400000000)}, 1, withResets(driver.Result{Outcome: driver.RateLimited, RetryAfter: time.Millisecond}, 31622400000000)},
	}
	for _, tt := range good {
		got, err := DecodeHit(tt.give, tt.n, 0)
		if err != nil || got != tt.want {
			t.Errorf("DecodeHit(%v, %d) = %+v, %v; want %+v", tt.give, tt.n, got, err, tt.want)
		}
	}
	bad := []struct {
		give any
		n    int
	}{
		{nil, 0}, {"OK", 0}, {int64(1), 0}, {[]any{}, 0}, {[]any{"1"}, 0}, {[]any{int64(1)}, 0},
		{[]any{int64(1), int64(2)}, 0}, {[]any{int64(2)}, 0}, {[]any{int64(2), ""}, 0}, {[]any{int64(2), int64(5)}, 0},
		{[]any{int64(3), int64(0)}, 0}, {[]any{int64(4), "5"}, 0}, {[]any{int64(4), int64(-1)}, 0},
		{[]any{int64(9), int64(1)}, 0}, {[]any{int64(1), nil, nil}, 0}, {[]any{nil}, 0},
		// The reset-afters: one per charge, integers from 0 to 3 × 366 days.
		{[]any{int64(1), int64(0)}, 1}, {[]any{int64(1), int64(0), int64(1)}, 0},
		{[]any{int64(1), int64(0), int64(-1)}, 1}, {[]any{int64(1), int64(0), "5"}, 1},
		{[]any{int64(1), int64(0), nil}, 1}, {[]any{int64(1), int64(0), int64(maxMicros + 1)}, 1},
		{make([]any, 2+driver.MaxCharges+1), driver.MaxCharges + 1},
	}
	for _, tt := range bad {
		if _, err := DecodeHit(tt.give, tt.n, 0); !errors.Is(err, ErrMalformed) {
			t.Errorf("DecodeHit(%#v, %d): got %v, want ErrMalformed", tt.give, tt.n, err)
		}
	}
	// Window charges (bits of windows): a reset-after of at least 1µs,
	// then each one's count after the r_i, in order.
	got, err := DecodeHit([]any{int64(1), int64(0), int64(5), int64(700), int64(9), int64(3), int64(12)}, 3, 0b101)
	want := withResets(driver.Result{Outcome: driver.OK}, 5, 700, 9)
	want.Buckets[0].Used, want.Buckets[2].Used = 3, 12
	if err != nil || got != want {
		t.Errorf("DecodeHit with windows = %+v, %v; want %+v", got, err, want)
	}
	for _, tt := range []struct {
		give    any
		n       int
		windows uint8
	}{
		{[]any{int64(1), int64(0), int64(5)}, 1, 1},                             // no count
		{[]any{int64(1), int64(0), int64(5), int64(1), int64(2)}, 1, 1},         // one too many
		{[]any{int64(1), int64(0), int64(0), int64(1)}, 1, 1},                   // a window with no time left
		{[]any{int64(1), int64(0), int64(5), int64(-1)}, 1, 1},                  // a negative count
		{[]any{int64(1), int64(0), int64(5), "1"}, 1, 1},                        // a string count
		{[]any{int64(1), int64(0), int64(5), int64(1 << 51)}, 1, 1},             // past MaxWindowUnits
		{[]any{int64(4), int64(3), int64(5), int64(7), int64(1)}, 2, 0b11 << 1}, // a window past n
	} {
		if _, err := DecodeHit(tt.give, tt.n, tt.windows); !errors.Is(err, ErrMalformed) {
			t.Errorf("DecodeHit(%#v, %d, %b): got %v, want ErrMalformed", tt.give, tt.n, tt.windows, err)
		}
	}
}

func TestDecodeSettle(t *testing.T) {
	t.Parallel()
	errs, err := DecodeSettle([]any{int64(0), "", int64(1), "other", int64(2), ""}, 3)
	if err != nil {
		t.Fatal(err)
	}
	var lost *driver.ClaimLostError
	if errs[0] != nil || !errors.As(errs[1], &lost) || lost.Holder != "other" || !errors.Is(errs[2], driver.ErrAlreadyCommitted) {
		t.Errorf("got %v", errs)
	}
	for _, give := range []any{nil, "OK", []any{int64(0)}, []any{"0", ""}, []any{int64(0), int64(0)}, []any{int64(7), ""}, []any{int64(0), "", int64(0), ""}} {
		if _, err := DecodeSettle(give, 1); !errors.Is(err, ErrMalformed) {
			t.Errorf("DecodeSettle(%#v, 1): got %v, want ErrMalformed", give, err)
		}
	}
}

func TestScriptsLoad(t *testing.T) {
	t.Parallel()
	for _, s := range []*Script{Hit, Settle, Present} {
		if len(s.SHA1) != 40 || !strings.Contains(s.Source, "function C.decode_claim") {
			t.Errorf("%s: sha %q, source of %d bytes", s.Name, s.SHA1, len(s.Source))
		}
	}
}

func TestSettleCall(t *testing.T) {
	t.Parallel()
	cl := driver.Claim{Tenant: "t", SourceID: "s", Key: "k", HookID: "h", TTL: 1500 * time.Microsecond}
	keys, args := SettleCall("p", true, []driver.Claim{cl, cl})
	d := ClaimDigest("s", "k")
	want := []string{"p:{t}" + string(d[:]), "p:{t}" + string(d[:])}
	if strings.Join(keys, " ") != strings.Join(want, " ") || strings.Join(args, " ") != "c h 1500 h 1500" {
		t.Errorf("keys %q args %q", keys, args)
	}
	if got := PresentCall("p", []driver.Claim{cl, cl}); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("present keys %q", got)
	}
	// A TTL below 1µs still expires in the future.
	cl.TTL = time.Nanosecond
	if _, args := SettleCall("p", false, []driver.Claim{cl}); strings.Join(args, " ") != "r h 1" {
		t.Errorf("args %q", args)
	}
}

func TestShardKeys(t *testing.T) {
	t.Parallel()
	if got := ShardKey("p", "a:b", 12); got != "p:{a%3Ab}:s12" || !IsShardKey(got) {
		t.Errorf("ShardKey = %q", got)
	}
	for _, k := range []string{"p:{t}:b", ClaimKey("p", "t", "s", "k"), "p:{t}:s", "p:{t}:sx", "p:{t}:s1x", "p:s1"} {
		if IsShardKey(k) {
			t.Errorf("IsShardKey(%q)", k)
		}
	}
	// Records are the 16-byte fields and the TATs; the state s is not. A
	// passed record or TAT is absent.
	a, b, c := strings.Repeat("a", 16), strings.Repeat("b", 16), strings.Repeat("c", 16)
	recs := ShardRecords("k", []string{"s", "1 0 0 0 0", a, "D\x00\x00\x00\x00\x00\x03\xe8h",
		"hooks:", "900", b, "P\x00\x00\x00\x00\x00\x01\xf4h", "bytes:", "500", "kind:", "x1", c, "junk",
		"month#", "100 700 12", "day#", "400 500 3", "week#", "700 9", "year#", "x 700 1", "hour#", "100 700 x"}, 600)
	want := []driver.Record{{Key: "k#" + strings.Repeat("61", 16), TTL: 400 * time.Microsecond},
		{Key: "k#hooks:", TTL: 300 * time.Microsecond}, {Key: "k#kind:", TTL: -1},
		{Key: "k#" + strings.Repeat("63", 16), TTL: -1}, {Key: "k#month#", TTL: 100 * time.Microsecond},
		{Key: "k#week#", TTL: -1}, {Key: "k#year#", TTL: -1}, {Key: "k#hour#", TTL: -1}}
	if !slices.Equal(recs, want) {
		t.Errorf("ShardRecords = %v, want %v", recs, want)
	}
	// A field no script writes (empty, or neither a record's, a TAT's nor
	// a count's) is reported for a test to fail on, never a panic.
	recs = ShardRecords("k", []string{"", "1", "odd", "900"}, 600)
	if want := []driver.Record{{Key: "k#", TTL: -1}, {Key: "k#odd", TTL: -1}}; !slices.Equal(recs, want) {
		t.Errorf("ShardRecords of fields no script writes = %v, want %v", recs, want)
	}
}

func TestDecodeRecord(t *testing.T) {
	t.Parallel()
	if st, hook, us, ok := DecodeRecord("D\x00\x01\x1f\x71\xfb\x04\xcbhook"); !ok || st != 'D' || hook != "hook" || us != 1234567890123 {
		t.Errorf("got %c %q %d %v", st, hook, us, ok)
	}
	if st, hook, us, ok := DecodeRecord("P\x00\x06\x5a\x1b\x2c\x3d\x4eh"); !ok || st != 'P' || hook != "h" || us != 0x065a1b2c3d4e {
		t.Errorf("got %c %q %d %v", st, hook, us, ok)
	}
	for _, v := range []string{"", "c", "c0001234567890123h", "C0001234567890123hook", "q0001234567890123hook", "q123456789012345", "P\x00\x06\x5a\x1b\x2c\x3d\x4e",
		"D\x20\x06\x5a\x1b\x2c\x3d\x4eh", "D\x00\x06\x5a\x1b\x2c\x3d\x4e" + strings.Repeat("h", 257), "x0001234567890123h", "c000123456789012xh", "c-001234567890123h", "c0001234567890123" + strings.Repeat("h", 257)} {
		if _, _, _, ok := DecodeRecord(v); ok {
			t.Errorf("DecodeRecord(%q) ok", v)
		}
	}
}

func TestPeekCall(t *testing.T) {
	t.Parallel()
	charges := []driver.Charge{{Kind: "bytes", Tenant: "a:b"}, {Kind: "hooks", Tenant: "a:b"}}
	keys, args := PeekCall("p", charges)
	if len(keys) != 1 || keys[0] != "p:{a%3Ab}:s0" || strings.Join(args, ",") != "bytes:,hooks:" {
		t.Errorf("PeekCall: keys %q args %q, want shard 0 and the TAT fields in order", keys, args)
	}
	// The script must be a script of its own: its first line is the
	// shebang whose no-writes flag has the server refuse its writes.
	if !strings.HasPrefix(Peek.Source, "#!lua flags=no-writes\n") || len(Peek.SHA1) != 40 {
		t.Errorf("peek script: first line %q", strings.SplitN(Peek.Source, "\n", 2)[0])
	}
}

func TestDecodePeek(t *testing.T) {
	t.Parallel()
	got, err := DecodePeek([]any{int64(0), int64(31622400000000)}, 2, 0)
	want := driver.Result{NBuckets: 2}
	want.Buckets[1].ResetAfter = 31622400000000 * time.Microsecond
	if err != nil || got != want {
		t.Errorf("DecodePeek = %+v, %v; want %+v", got, err, want)
	}
	got, err = DecodePeek([]any{int64(0), int64(40), int64(6)}, 2, 0b10)
	want = driver.Result{NBuckets: 2}
	want.Buckets[1].ResetAfter, want.Buckets[1].Used = 40*time.Microsecond, 6
	if err != nil || got != want {
		t.Errorf("DecodePeek with a window = %+v, %v; want %+v", got, err, want)
	}
	if _, err := DecodePeek([]any{int64(0), int64(40)}, 2, 0b10); !errors.Is(err, ErrMalformed) {
		t.Errorf("DecodePeek without the window's count: %v, want ErrMalformed", err)
	}
	for _, tt := range []struct {
		give any
		n    int
	}{
		{nil, 1}, {"OK", 1}, {int64(1), 1}, {[]any{}, 1}, {[]any{int64(1)}, 2},
		{[]any{int64(1), int64(1)}, 1}, {[]any{"5"}, 1}, {[]any{nil}, 1}, {[]any{int64(-1)}, 1},
		{[]any{int64(maxMicros + 1)}, 1}, {make([]any, driver.MaxCharges+1), driver.MaxCharges + 1},
	} {
		if _, err := DecodePeek(tt.give, tt.n, 0); !errors.Is(err, ErrMalformed) {
			t.Errorf("DecodePeek(%#v, %d): got %v, want ErrMalformed", tt.give, tt.n, err)
		}
	}
}

// TestLibrary: the library names itself and each function after the
// version of the code, holds claim.lua once and every script as a function
// (none with a shebang of its own), registers peek alone as no-writes,
// and reads the clock once per call of hit, settle and round, in their
// callbacks (a round decides all its calls at one now).
func TestLibrary(t *testing.T) {
	t.Parallel()
	src := Library.Source
	if !strings.HasPrefix(src, "#!lua name="+Library.Name+"\n") || strings.Count(src, "#!") != 1 {
		t.Fatalf("library source does not start with its one shebang: %.60q", src)
	}
	if len(Library.Name) != len("fleetstore_")+16 || !strings.HasPrefix(Library.Name, "fleetstore_") {
		t.Errorf("library name %q, want fleetstore_ and 16 hex digits", Library.Name)
	}
	if n := strings.Count(src, "local C = {}"); n != 1 {
		t.Errorf("claim.lua %d times in the library, want once", n)
	}
	for _, s := range []*Script{Hit, Settle, Round, Present, Peek} {
		if s.Function != Library.Name+"_"+s.Name {
			t.Errorf("%s: function %q", s.Name, s.Function)
		}
		params, callback := "(KEYS, ARGV)", s.Name
		if _, ok := bodies[s.Name]; ok {
			params = "(KEYS, ARGV, now)"
			callback = "function(KEYS, ARGV) C.init() return " + s.Name + "(KEYS, ARGV, C.now()) end"
		}
		reg := "redis.register_function{function_name = '" + s.Function + "', callback = " + callback
		if n := strings.Count(src, reg); n != 1 {
			t.Errorf("%s registered %d times", s.Name, n)
		}
		if s == Peek != strings.Contains(src, reg+", flags = {'no-writes'}}") {
			t.Errorf("%s: no-writes flag wrong", s.Name)
		}
		if n := strings.Count(src, "\nlocal function "+s.Name+params+"\n"); n != 1 {
			t.Errorf("%s defined %d times", s.Name, n)
		}
	}
	for name, body := range bodies {
		if strings.Contains(body, "'TIME'") {
			t.Errorf("%s reads the clock itself: a round would not decide at one now", name)
		}
	}
}

// TestRoundCall: a Round's KEYS are its ops' in order, and its ARGV each
// op's script, counts and arguments; DecodeRound hands each op its reply
// and turns a string into that op's ScriptError alone.
func TestRoundCall(t *testing.T) {
	t.Parallel()
	keys, args := RoundCall([]RoundOp{
		{Keys: []string{"b", "c"}, Args: []string{"1", "k", "5", "9", "h", "7"}},
		{Settle: true, Keys: []string{"c"}, Args: []string{"c", "h", "3"}},
	})
	if got := strings.Join(keys, " "); got != "b c c" {
		t.Errorf("keys %q", got)
	}
	if got, want := strings.Join(args, " "), "h 2 6 1 k 5 9 h 7 s 1 3 c h 3"; got != want {
		t.Errorf("args %q, want %q", got, want)
	}
	got, err := DecodeRound([]any{[]any{int64(1), int64(0)}, "ERR boom"}, 2)
	if err != nil || len(got) != 2 {
		t.Fatalf("DecodeRound: %v %v", got, err)
	}
	if _, ok := got[0].([]any); !ok {
		t.Errorf("op 0: %#v, want its reply", got[0])
	}
	var se *ScriptError
	if !errors.As(got[1].(error), &se) || se.Text != "ERR boom" {
		t.Errorf("op 1: %#v, want a ScriptError", got[1])
	}
	for _, bad := range []any{nil, "x", []any{}, []any{int64(1), []any{}}, []any{[]any{}}} {
		if _, err := DecodeRound(bad, 2); !errors.Is(err, ErrMalformed) {
			t.Errorf("DecodeRound(%#v): %v, want ErrMalformed", bad, err)
		}
	}
}

// TestTATField: a TAT or window field is never 16 bytes long (a claim
// record's field) nor the state field s, whatever the kind's length, and
// no two kinds, nor a kind's TAT and count, share one.
func TestTATField(t *testing.T) {
	t.Parallel()
	seen := map[string]driver.Kind{}
	for n := 1; n <= 32; n++ {
		for _, k := range []driver.Kind{driver.Kind(strings.Repeat("k", n)), driver.Kind("a" + strings.Repeat("_", n-1))} {
			for _, f := range []string{TATField(k), WindowField(k)} {
				if len(f) == DigestSize || f == "s" || !strings.HasPrefix(f, string(k)) {
					t.Errorf("field %q of kind %q", f, k)
				}
				if other, ok := seen[f]; ok {
					t.Errorf("kinds %q and %q share field %q", k, other, f)
				}
				seen[f] = k
			}
		}
	}
}
