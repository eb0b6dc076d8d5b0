package scripts

import (
	"strconv"
	"time"
	"unsafe"

	"github.com/fleetstore/fleetstore/driver"
)

// callBuf builds the KEYS and ARGV of one script call in two
// allocations: the bytes of every key and number it formats go into one
// buffer, sized up front, and every string it returns is either a slice of
// that buffer or a string the caller gave (a kind, a hook_id), all in one
// []string. The output is byte for byte that of ShardKey, ClaimKey,
// TATField, WindowField and strconv (TestCallBufMatchesReference).
//
// A built string points into b (unsafe.String) as soon as it is complete:
// b is only ever appended to, so its bytes are never written again, and
// should an append outgrow the capacity, the strings already made keep the
// old array alive, unchanged.
type callBuf struct {
	b   []byte
	out []string
}

// newCallBuf returns a callBuf for n strings of at most size built bytes.
func newCallBuf(n, size int) callBuf {
	return callBuf{b: make([]byte, 0, size), out: make([]string, 0, n)}
}

// numLen is the most bytes a decimal int64 takes: the buffer's room for
// each number (a few bytes more than it needs beat counting digits).
const numLen = 20

// tagLen is the length of TenantTag(keyPrefix, tenant).
func tagLen(keyPrefix, tenant string) int {
	return len(keyPrefix) + len(":{}") + encodedLen(tenant)
}

// encodedLen is len(Encode(s)).
func encodedLen(s string) int {
	n := len(s)
	for i := 0; i < len(s); i++ {
		if !plain(s[i]) {
			n += 2
		}
	}
	return n
}

// appendEncode appends Encode(s) to b.
func appendEncode(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if plain(c) {
			b = append(b, c)
			continue
		}
		b = append(b, '%', hexDigits[c>>4], hexDigits[c&15])
	}
	return b
}

// appendTag appends TenantTag(keyPrefix, tenant) to b.
func appendTag(b []byte, keyPrefix, tenant string) []byte {
	b = append(b, keyPrefix...)
	b = append(b, ":{"...)
	b = appendEncode(b, tenant)
	return append(b, '}')
}

// given adds s as it is.
func (c *callBuf) given(s string) { c.out = append(c.out, s) }

// end adds the string built in b since start.
func (c *callBuf) end(start int) {
	if len(c.b) == start {
		c.out = append(c.out, "")
		return
	}
	c.out = append(c.out, unsafe.String(&c.b[start], len(c.b)-start))
}

// tagged adds TenantTag(keyPrefix, tenant) + suffix.
func (c *callBuf) tagged(keyPrefix, tenant, suffix string) {
	start := len(c.b)
	c.b = append(appendTag(c.b, keyPrefix, tenant), suffix...)
	c.end(start)
}

// claimKey adds ClaimKey(keyPrefix, tenant, source, key).
func (c *callBuf) claimKey(keyPrefix, tenant, source, key string) {
	d := ClaimDigest(source, key)
	start := len(c.b)
	c.b = append(appendTag(c.b, keyPrefix, tenant), d[:]...)
	c.end(start)
}

// field adds TATField(kind) (sep ':') or WindowField(kind) (sep '#').
func (c *callBuf) field(kind driver.Kind, sep byte) {
	start := len(c.b)
	c.b = append(c.b, kind...)
	c.b = append(c.b, sep)
	if len(kind) == DigestSize-1 {
		c.b = append(c.b, sep)
	}
	c.end(start)
}

// int adds strconv.FormatInt(v, 10).
func (c *callBuf) int(v int64) {
	start := len(c.b)
	c.b = strconv.AppendInt(c.b, v, 10)
	c.end(start)
}

// micros adds d as whole µs, rounded up, at least 1.
func (c *callBuf) micros(d time.Duration) { c.int(micros(d)) }

// done returns the strings added, the first nKeys of them the keys.
func (c *callBuf) done(nKeys int) (keys, args []string) {
	return c.out[:nKeys:nKeys], c.out[nKeys:]
}
