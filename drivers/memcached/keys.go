package memcached

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"hash/crc32"
	"strings"
)

// Keys are "PREFIX:b:T" (a tenant's bucket item) and "PREFIX:c:D" (a
// claim). T is the tenant encoded as one token by appendToken; D is 27 bytes of
// base64url over 20 bytes: the tenant's server hash (4 bytes, the CRC-32
// of T, big-endian) and the first 16 bytes of the SHA-256 of the tenant,
// source_id and key, each preceded by its length as a uvarint. A token and
// D never contain ':', so the kinds of key never meet; bucket keys are
// injective (V2) and claim keys are injective but for a digest collision:
// among n claims of one key_prefix two share a key with a probability
// below n²/2^129 (a false Duplicate; the package doc's Items section). The
// longest key is a bucket's, 64 + 3 + 44 = 111 bytes of printable ASCII
// (V3). Both kinds carry the tenant's server hash: the server selector
// reads it (shard), so all of a tenant's items live on one server and a
// Hit reads them in one round trip.

// maxPlain is the longest part kept readable; longer parts are hashed.
const maxPlain = 40

// maxToken is the longest token: "h" and 43 bytes of base64url.
const maxToken = 1 + 43

// digestLen is the bytes of SHA-256 a claim key keeps: 128 bits.
const digestLen = 16

// claimIDLen is the length of D, the last field of a claim key: base64url
// of the 4-byte server hash and the digest.
const claimIDLen = (4+digestLen)*4/3 + 1 // 27

// appendToken appends the token of part to b: "r" + the part itself when
// it is 1–40 bytes of [A-Za-z0-9._-], otherwise "h" +
// base64url(SHA-256(part)), 44 bytes. The first byte keeps the two forms
// apart.
func appendToken(b []byte, part string) []byte {
	if len(part) <= maxPlain && plain(part) {
		b = append(b, 'r')
		return append(b, part...)
	}
	sum := sha256.Sum256([]byte(part))
	b = append(b, 'h')
	return base64.RawURLEncoding.AppendEncode(b, sum[:])
}

func plain(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// tenantHash is the server hash of a tenant: the CRC-32 of its token, as
// gomemcache's ServerList hashes whole keys.
func tenantHash(tenant string) uint32 {
	var buf [maxToken]byte
	return crc32.ChecksumIEEE(appendToken(buf[:0], tenant))
}

// keys builds the item keys of one store.
type keys struct{ prefix string }

// maxKey is the longest key: a bucket's with a 64-byte key_prefix.
const maxKey = 64 + 3 + maxToken

func (k keys) bucket(tenant string) string {
	var buf [maxKey]byte // the key is built on the stack, then copied once
	b := append(buf[:0], k.prefix...)
	b = append(b, ":b:"...)
	return string(appendToken(b, tenant))
}

func (k keys) claim(tenant, source, key string) string {
	var stack [256]byte // the digest's input, on the stack for short parts
	in := stack[:0]
	for _, part := range [...]string{tenant, source, key} {
		in = binary.AppendUvarint(in, uint64(len(part)))
		in = append(in, part...)
	}
	sum := sha256.Sum256(in)
	var id [4 + digestLen]byte
	binary.BigEndian.PutUint32(id[:4], tenantHash(tenant))
	copy(id[4:], sum[:digestLen])
	var buf [maxKey]byte
	b := append(buf[:0], k.prefix...)
	b = append(b, ":c:"...)
	return string(base64.RawURLEncoding.AppendEncode(b, id[:]))
}

// claimHash returns the tenant's server hash a claim key carries, and
// false when key is not a claim key.
func claimHash(key string) (uint32, bool) {
	i := strings.LastIndexByte(key, ':')
	if i < 2 || key[i-2:i] != ":c" || len(key)-i-1 != claimIDLen {
		return 0, false
	}
	var src [8]byte // the first 6 bytes of the id
	copy(src[:], key[i+1:])
	var id [6]byte
	if _, err := base64.RawURLEncoding.Decode(id[:], src[:]); err != nil {
		return 0, false
	}
	return binary.BigEndian.Uint32(id[:4]), true
}

// shard returns the server index of key among n: its tenant's server hash
// (tenantHash), read from a claim key or computed from a bucket key's
// token (its last ':'-separated field).
func shard(key string, n int) int {
	if n <= 1 {
		return 0
	}
	h, ok := claimHash(key)
	if !ok {
		h = crc32.ChecksumIEEE([]byte(key[strings.LastIndexByte(key, ':')+1:]))
	}
	return int(h % uint32(n))
}
