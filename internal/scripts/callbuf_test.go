package scripts

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fleetstore/fleetstore/driver"
)

// The straightforward forms of the key encoding and of the call builders,
// one string at a time: the reference the one-buffer builders must match
// byte for byte.

func refEncode(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("._~-", c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

func refTag(prefix, tenant string) string { return prefix + ":{" + refEncode(tenant) + "}" }

func refClaimKey(prefix, tenant, source, key string) string {
	h := sha256.New()
	h.Write(binary.AppendUvarint(nil, uint64(len(source))))
	h.Write([]byte(source))
	h.Write([]byte(key))
	return refTag(prefix, tenant) + string(h.Sum(nil)[:16])
}

func refMicros(d time.Duration) string {
	us := int64(d / time.Microsecond)
	if d%time.Microsecond != 0 {
		us++
	}
	return strconv.FormatInt(max(us, 1), 10)
}

func refHitCall(prefix string, charges []driver.Charge, claim *driver.Claim) (keys, args []string) {
	tenant := ""
	if len(charges) > 0 {
		tenant = charges[0].Tenant
	} else {
		tenant = claim.Tenant
	}
	keys = []string{refTag(prefix, tenant) + ":s0"}
	args = []string{strconv.Itoa(len(charges))}
	for _, c := range charges {
		if c.Window.Max != 0 {
			args = append(args, strings.TrimSuffix(refTATField(c.Kind), ":")+"#", strconv.FormatInt(c.Window.Cost, 10), strconv.FormatInt(c.Window.Max, 10))
			if len(c.Kind) == 15 {
				args[len(args)-3] = string(c.Kind) + "##"
			}
			for _, e := range c.Window.Edges {
				args = append(args, strconv.FormatInt(e, 10))
			}
			continue
		}
		args = append(args, refTATField(c.Kind), strconv.FormatInt(c.Increment.Microseconds(), 10), strconv.FormatInt(c.Capacity.Microseconds(), 10))
	}
	if claim != nil {
		keys = append(keys, refClaimKey(prefix, claim.Tenant, claim.SourceID, claim.Key))
		args = append(args, claim.HookID, refMicros(claim.PendingTTL))
	}
	return keys, args
}

// refTATField is TATField as its doc says it: the kind and ':', "::"
// when that would be 16 bytes long.
func refTATField(kind driver.Kind) string {
	f := string(kind) + ":"
	if len(f) == 16 {
		f += ":"
	}
	return f
}

func refSettleCall(prefix string, commit bool, claims []driver.Claim) (keys, args []string) {
	args = []string{"r"}
	if commit {
		args[0] = "c"
	}
	for _, c := range claims {
		keys = append(keys, refClaimKey(prefix, c.Tenant, c.SourceID, c.Key))
		args = append(args, c.HookID, refMicros(c.TTL))
	}
	return keys, args
}

// TestCallBufMatchesReference: HitCall, SettleCall and the key functions
// give byte for byte the strings of the straightforward reference above,
// on tenants that need %XX escapes (bytes outside [A-Za-z0-9._~-], braces,
// ':' and '%' among them), long sources and keys (past ClaimDigest's
// stack buffer), every charge count from 0 to MaxCharges, with and without
// a claim, TTLs below, at and above whole µs.
func TestCallBufMatchesReference(t *testing.T) {
	t.Parallel()
	tenants := []string{"t", "tenant-000042", "a:b", "{x}", "}{", "50%", "%25", "é ü", "\x00\xff", "a b\tc\n",
		"~._-AZaz09", strings.Repeat("ü", 512)}
	prefixes := []string{"fleet", "p", "a.b-c_d~e"}
	sources := []string{"github", "s", strings.Repeat("s", 300)}
	keys := []string{"k", "6f1d2c1e-4a8b-11ef-9c3d-0242ac120002", strings.Repeat("k", 1024), "a:b{c}%"}
	ttls := []time.Duration{time.Nanosecond, time.Microsecond, 1500*time.Nanosecond + time.Millisecond, 72 * time.Hour, 366 * 24 * time.Hour}
	kinds := []driver.Kind{"hooks", "bytes", "k", "a_very_long_kind_name_of_32_byte", "kind_of_15_byte"}
	n := 0
	for ti, tenant := range tenants {
		if got, want := Encode(tenant), refEncode(tenant); got != want {
			t.Errorf("Encode(%q) = %q, want %q", tenant, got, want)
		}
		if got, want := string(appendEncode([]byte("x"), tenant)), "x"+refEncode(tenant); got != want || encodedLen(tenant) != len(want)-1 {
			t.Errorf("appendEncode(%q) = %q (length %d), want %q", tenant, got, encodedLen(tenant), want)
		}
		for pi, prefix := range prefixes {
			if got, want := ShardKey(prefix, tenant, 0), refTag(prefix, tenant)+":s0"; got != want {
				t.Errorf("ShardKey 0 = %q, want %q", got, want)
			}
			var claims []driver.Claim
			for si, source := range sources {
				for ki, key := range keys {
					ttl := ttls[(ti+pi+si+ki)%len(ttls)]
					cl := driver.Claim{Tenant: tenant, SourceID: source, Key: key, HookID: "hook-" + strconv.Itoa(n), TTL: ttl, PendingTTL: ttls[(ti+ki)%len(ttls)]}
					claims = append(claims, cl)
					n++
					if got, want := ClaimKey(prefix, tenant, source, key), refClaimKey(prefix, tenant, source, key); got != want {
						t.Errorf("ClaimKey(%q, %q, %q, %q) = %q, want %q", prefix, tenant, source, key, got, want)
					}
					for nc := 0; nc <= driver.MaxCharges; nc++ {
						charges := make([]driver.Charge, nc)
						for i := range charges {
							charges[i] = driver.Charge{Kind: kinds[(i+ki)%len(kinds)], Tenant: tenant,
								Increment: ttls[(i+si)%len(ttls)].Truncate(time.Microsecond) + time.Microsecond, Capacity: ttls[(i+ki+1)%len(ttls)].Truncate(time.Microsecond) + time.Microsecond}
							if (i+ti+ki)%3 == 0 { // a window charge
								e := int64(1765000000000000 + ti*1000 + i)
								charges[i] = driver.Charge{Kind: charges[i].Kind, Tenant: tenant,
									Window: driver.Window{Max: int64(driver.MaxWindowUnits - i), Cost: int64(1 + si), Edges: [4]int64{e, e + 86400e6, e + 2*86400e6, e + 3*86400e6}}}
							}
						}
						for _, claim := range []*driver.Claim{&cl, nil} {
							if nc == 0 && claim == nil {
								continue
							}
							gk, ga := HitCall(prefix, charges, claim)
							wk, wa := refHitCall(prefix, charges, claim)
							if !slices.Equal(gk, wk) || !slices.Equal(ga, wa) {
								t.Fatalf("HitCall(%q, %d charges, claim %v):\nkeys %q\nwant %q\nargs %q\nwant %q", prefix, nc, claim != nil, gk, wk, ga, wa)
							}
							if len(gk) != cap(gk) {
								t.Fatalf("HitCall's keys have room for %d more: an append would write into its args", cap(gk)-len(gk))
							}
						}
					}
				}
			}
			for _, commit := range []bool{true, false} {
				for _, batch := range [][]driver.Claim{claims[:1], claims[:2], claims} {
					gk, ga := SettleCall(prefix, commit, batch)
					wk, wa := refSettleCall(prefix, commit, batch)
					if !slices.Equal(gk, wk) || !slices.Equal(ga, wa) {
						t.Fatalf("SettleCall(%q, %v, %d claims):\nkeys %q\nwant %q\nargs %q\nwant %q", prefix, commit, len(batch), gk, wk, ga, wa)
					}
					if got := PresentCall(prefix, batch); !slices.Equal(got, wk) {
						t.Fatalf("PresentCall keys %q, want %q", got, wk)
					}
				}
			}
		}
	}
}

// BenchmarkHitCall: the client's cost of building a Hit's keys and
// arguments (two charges and a claim), which the Redis-family drivers pay
// on every Hit.
//
//	go test -run '^$' -bench HitCall -benchmem ./internal/scripts
func BenchmarkHitCall(b *testing.B) {
	charges := []driver.Charge{
		{Kind: "hooks", Tenant: "tenant-000042", Increment: time.Millisecond, Capacity: time.Hour},
		{Kind: "bytes", Tenant: "tenant-000042", Increment: 1900 * time.Microsecond, Capacity: 24 * time.Hour},
	}
	cl := &driver.Claim{Tenant: "tenant-000042", SourceID: "github", Key: "6f1d2c1e-4a8b-11ef-9c3d-0242ac120002",
		HookID: "01J9Z8XQ4T7W3M2N5P6R8S9V0A", TTL: 72 * time.Hour, PendingTTL: 30 * time.Second}
	for b.Loop() {
		HitCall("fleet", charges, cl)
	}
}
