package scripts

import "strings"

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

// BucketKey is the hash holding every kind's TAT of tenant.
func BucketKey(keyPrefix, tenant string) string {
	return TenantTag(keyPrefix, tenant) + ":b"
}

// ClaimKey is the string holding the claim on key of source of tenant.
func ClaimKey(keyPrefix, tenant, source, key string) string {
	return TenantTag(keyPrefix, tenant) + ":c:" + Encode(source) + ":" + Encode(key)
}

// TenantPattern is a SCAN MATCH pattern for every key of tenant: the
// encoded parts and the prefix hold no glob metacharacters.
func TenantPattern(keyPrefix, tenant string) string {
	return TenantTag(keyPrefix, tenant) + ":*"
}
