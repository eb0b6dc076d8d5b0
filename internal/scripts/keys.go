package scripts

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"strconv"
	"strings"
	"time"

	"github.com/fleetstore/fleetstore/driver"
)

// Encode escapes s for use in a key: bytes outside [A-Za-z0-9._~-] become
// %XX (upper-case hex). It is injective, and its output never contains
// ':', '{' or '}', so it can sit inside a hash tag and between ':'
// separators.
func Encode(s string) string {
	n := 0
	for i := 0; i < len(s); i++ {
		if !plain(s[i]) {
			n++
		}
	}
	if n == 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 2*n)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if plain(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&15])
	}
	return b.String()
}

const hexDigits = "0123456789ABCDEF"

func plain(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '.' || c == '_' || c == '~' || c == '-'
}

// TenantTag returns "PREFIX:{T}", T being the encoded tenant: the start of
// every key of tenant, whose hash tag puts them all in one cluster slot.
// keyPrefix has no braces (the Store checks it).
func TenantTag(keyPrefix, tenant string) string {
	return keyPrefix + ":{" + Encode(tenant) + "}"
}

// TATField is the field of shard 0 (ShardKey i = 0) that holds the TAT
// of kind's bucket: the kind and ':', or "::" after a kind of 15 bytes, so
// that no TAT field is 16 bytes long (a claim record's) or is the state
// field s. A kind holds no ':' ([a-z][a-z0-9_]{0,31}), so the field names
// its kind alone.
func TATField(kind driver.Kind) string {
	if len(kind) == DigestSize-1 {
		return string(kind) + "::"
	}
	return string(kind) + ":"
}

// WindowField is the field of shard 0 that holds the count of kind's
// calendar quota (CONTRACT §3.2): the kind and '#', or "##" after a kind
// of 15 bytes, for the reasons of TATField. Its value is "START END
// COUNT", the start and end (µs) of the window charged last and the units
// counted in it, in decimal (hit.lua).
func WindowField(kind driver.Kind) string {
	if len(kind) == DigestSize-1 {
		return string(kind) + "##"
	}
	return string(kind) + "#"
}

// tatFieldLen is len(TATField(kind)), and len(WindowField(kind)).
func tatFieldLen(kind driver.Kind) int {
	if len(kind) == DigestSize-1 {
		return len(kind) + 2
	}
	return len(kind) + 1
}

// ClaimKey is the string holding the claim on key of source of tenant:
// the tenant's tag, then the claim's 16-byte [ClaimDigest] as raw bytes.
// The digest follows the hash tag, so its bytes cannot change the slot;
// a shard key has 3 to 13 bytes after the tag (":s" and at most 11
// digits), a claim key 16, so they never meet. 19 bytes plus the prefix
// and the encoded tenant, whatever the source and key: every byte saved
// here is saved per claim.
func ClaimKey(keyPrefix, tenant, source, key string) string {
	d := ClaimDigest(source, key)
	return keyPrefix + ":{" + Encode(tenant) + "}" + string(d[:])
}

// DigestSize is the length of a [ClaimDigest] in bytes: 128 bits.
const DigestSize = 16

// ClaimDigest returns the first 16 bytes of SHA-256 over source's length
// (uvarint), source and key: an injective encoding of the pair, so two
// claims of one tenant share a key only when SHA-256 collides on its first
// 128 bits. Among n claims of one tenant alive at once, the probability
// that any two share one is about n²/2^129 (1.0e-20 for n = 2.6e9: a 72h
// window of 10 000 hooks/s, all one tenant's); a collision would answer
// the later claim's Hit as the earlier one's (a false Duplicate or
// Pending). CONTRACT §7 states it.
func ClaimDigest(source, key string) [DigestSize]byte {
	var buf [128]byte
	b := binary.AppendUvarint(buf[:0], uint64(len(source)))
	b = append(b, source...)
	b = append(b, key...)
	sum := sha256.Sum256(b)
	return [DigestSize]byte(sum[:DigestSize])
}

// TenantPattern is a SCAN MATCH pattern for every key of tenant, and of
// no other tenant (an encoded tenant holds no '}'): the encoded tenant and
// the prefix hold no glob metacharacters.
func TenantPattern(keyPrefix, tenant string) string {
	return TenantTag(keyPrefix, tenant) + "*"
}

// ShardKey is shard i of tenant's claims: a hash of ClaimDigest → record
// and its state field s (the package doc). A tenant of 2^l + p buckets
// keeps them at shard 0 (one bucket) or shards 1 to 2^l + p, l and p in
// shard 0's state. Shard 0 also holds the tenant's TATs (TATField).
func ShardKey(keyPrefix, tenant string, i int) string {
	return TenantTag(keyPrefix, tenant) + ":s" + strconv.Itoa(i)
}

// IsShardKey reports whether key is a claim shard (ShardKey) of some
// tenant: after its hash tag (an encoded tenant holds no '}'), ":s" and a
// decimal index.
func IsShardKey(key string) bool {
	_, rest, ok := strings.Cut(key, "}")
	rest, ok2 := strings.CutPrefix(rest, ":s")
	if !ok || !ok2 || rest == "" {
		return false
	}
	for i := 0; i < len(rest); i++ {
		if rest[i] < '0' || rest[i] > '9' {
			return false
		}
	}
	return true
}

// ShardRecords returns the live records of shard key, whose fields and
// values are kv (HGETALL's reply), each with its own time to live from
// nowMicros (the server's clock, µs): a claim record until its expiry, a
// TAT (a field of shard 0) until the TAT, a window count until its END,
// the end of the window it was last charged in. A shard's own expiry is its
// latest record's (and at most a second more), so the records are what a
// claim's TTL bounds (C9) and what a bucket's TAT bounds (G7); a record
// that has passed is absent to every script. The state s is not a record.
// The Key of a claim record is the shard's and its field in hex, a TAT's
// or a count's the shard's and its field. A field or value that is not a
// record's, a TAT's or a count's (or one further ahead than any TTL or
// capacity allows) is reported with TTL -1 (no expiry), for a test to
// fail on.
func ShardRecords(key string, kv []string, nowMicros int64) []driver.Record {
	var out []driver.Record
	for i := 0; i+1 < len(kv); i += 2 {
		f, v := kv[i], kv[i+1]
		var k string
		var us int64
		ok := false
		switch {
		case f == "s":
			continue
		case len(f) == DigestSize:
			k = key + "#" + hex.EncodeToString([]byte(f))
			_, _, us, ok = DecodeRecord(v)
		case strings.HasSuffix(f, "#"):
			k = key + "#" + f
			us, ok = decodeWindow(v)
		case strings.HasSuffix(f, ":"):
			k = key + "#" + f
			us, ok = decodeTAT(v)
		default: // no script writes it
			k = key + "#" + f
		}
		switch {
		case !ok || us-nowMicros > maxMicros:
			out = append(out, driver.Record{Key: k, TTL: -1})
		case us > nowMicros:
			ttl := time.Duration(us-nowMicros) * time.Microsecond
			out = append(out, driver.Record{Key: k, TTL: ttl})
		}
	}
	return out
}

// decodeWindow decodes a window count as hit.lua writes it, "START END
// COUNT": the end, µs, of the window it was last charged in.
func decodeWindow(v string) (int64, bool) {
	start, rest, ok1 := strings.Cut(v, " ")
	end, count, ok2 := strings.Cut(rest, " ")
	_, oks := decodeTAT(start)
	_, okc := decodeTAT(count)
	if !ok1 || !ok2 || !oks || !okc {
		return 0, false
	}
	return decodeTAT(end)
}

// decodeTAT decodes a TAT as hit.lua writes it: decimal digits, µs.
func decodeTAT(v string) (int64, bool) {
	if v == "" || len(v) > 18 {
		return 0, false
	}
	var us int64
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			return 0, false
		}
		us = us*10 + int64(v[i]-'0')
	}
	return us, true
}

// DecodeRecord decodes a claim record as claim.lua writes it — state 'D'
// committed or 'P' pending, the expiry on the server's clock as 7 bytes
// big-endian (µs since the Unix epoch), the hook_id (1–256 bytes): its
// state byte, hook_id and expiry. ok is false for any other value.
func DecodeRecord(v string) (state byte, hookID string, expiresMicros int64, ok bool) {
	if len(v) < 9 || len(v) > 264 || v[0] != 'D' && v[0] != 'P' || v[1] >= 0x20 {
		return 0, "", 0, false
	}
	var us int64
	for i := 1; i < 8; i++ {
		us = us<<8 | int64(v[i])
	}
	return v[0], v[8:], us, true
}
