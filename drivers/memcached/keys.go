package memcached

import (
	"crypto/sha256"
	"encoding/base64"
	"hash/crc32"
	"strings"
)

// Keys are "PREFIX:b:T" (a tenant's bucket item) and "PREFIX:c:S:K:T" (a
// claim), where T, S and K are the tenant, source_id and key each encoded as
// one token by token. A token never contains ':', so the parts of a key are
// recovered by position and the encoding is injective (V2); the longest key
// is 64 + 3 + 3×44 + 2 = 201 bytes of printable ASCII (V3). The tenant token
// comes last in every key: the server selector hashes it, so all of a
// tenant's items live on one server and a Hit reads them in one round trip.

// maxPlain is the longest part kept readable; longer parts are hashed.
const maxPlain = 40

// maxToken is the longest token: "h" and 43 bytes of base64url.
const maxToken = 1 + 43

// token encodes one part: "r" + the part itself when it is 1–40 bytes of
// [A-Za-z0-9._-], otherwise "h" + base64url(SHA-256(part)), 44 bytes. The
// first byte keeps the two forms apart.
func token(part string) string {
	var b strings.Builder
	writeToken(&b, part)
	return b.String()
}

// writeToken writes token(part) to b: a key is built in one allocation.
func writeToken(b *strings.Builder, part string) {
	if len(part) <= maxPlain && plain(part) {
		b.WriteByte('r')
		b.WriteString(part)
		return
	}
	sum := sha256.Sum256([]byte(part))
	var enc [maxToken - 1]byte
	base64.RawURLEncoding.Encode(enc[:], sum[:])
	b.WriteByte('h')
	b.Write(enc[:])
}

func plain(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// keys builds the item keys of one store.
type keys struct{ prefix string }

func (k keys) bucket(tenant string) string {
	var b strings.Builder
	b.Grow(len(k.prefix) + 3 + maxToken)
	b.WriteString(k.prefix)
	b.WriteString(":b:")
	writeToken(&b, tenant)
	return b.String()
}

func (k keys) claim(tenant, source, key string) string {
	var b strings.Builder
	b.Grow(len(k.prefix) + 3 + 3*maxToken + 2)
	b.WriteString(k.prefix)
	b.WriteString(":c:")
	writeToken(&b, source)
	b.WriteByte(':')
	writeToken(&b, key)
	b.WriteByte(':')
	writeToken(&b, tenant)
	return b.String()
}

// shard returns the server index of key among n: the CRC-32 of its tenant
// token (its last ':'-separated field), as gomemcache's ServerList hashes
// whole keys.
func shard(key string, n int) int {
	if n <= 1 {
		return 0
	}
	t := key[strings.LastIndexByte(key, ':')+1:]
	return int(crc32.ChecksumIEEE([]byte(t)) % uint32(n))
}
