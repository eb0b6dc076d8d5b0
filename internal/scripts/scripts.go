// Package scripts holds the Lua scripts of the Redis-like drivers (Redis,
// Valkey) and the key layout they share, so that every such driver decides
// a Hit with the same code over the same keys. It depends on no client
// library: callers run the scripts with their own client (EVALSHA, then
// EVAL once on NOSCRIPT) and hand the reply, decoded into Go values
// (int64, string, []any), back to DecodeHit or DecodeSettle. The driver
// logic around the scripts (EVALSHA then EVAL, batches, errors) is
// package internal/rediscore.
//
// # Keys
//
// Every key of a tenant carries the cluster hash tag {T}, T being the
// tenant encoded by [Encode], so that a Hit's keys share one slot:
//
//	PREFIX:{T}:b          hash: kind → TAT (µs), one per tenant (Reset = DEL)
//	PREFIX:{T}:s<i>       hash: claim shard i, D → record, D a claim's
//	                      16-byte ClaimDigest of (source, key), raw; the
//	                      record is claim.lua's (state, expiry, hook_id);
//	                      and s, the shard's state (shard 0: the tenant's,
//	                      the level and split pointer of linear hashing)
//	PREFIX:{T}D           string: a claim whose record is too long for a
//	                      shard's listpack (a hook_id over 56 bytes)
//	PREFIX:{T}:n          hash: l, p, where the version before kept the
//	                      shards' state; read for a tenant whose shard 0
//	                      has none, never written
//
// The shard keys are not among a script's KEYS: the script derives them
// from the state key PREFIX:{T}:n (same hash tag, so the same slot).
//
// Encode escapes every byte outside [A-Za-z0-9._~-] as %XX, so an encoded
// tenant never holds ':', '{', '}' or '%' unescaped and tenants never share
// a key (CONTRACT V2): tenant "a:b" and tenant "a" are different tags. The
// claims of one tenant are told apart by a 128-bit digest, not exactly:
// see [ClaimDigest] for the probability that two share a key.
package scripts

import (
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
)

// Script is one Lua script: its source and the SHA1 that EVALSHA names it
// by.
type Script struct {
	Name   string // "hit" or "settle"
	Source string
	SHA1   string // lower-case hex, as SCRIPT LOAD returns it
}

var (
	//go:embed claim.lua
	claimLua string
	//go:embed hit.lua
	hitLua string
	//go:embed settle.lua
	settleLua string
	//go:embed present.lua
	presentLua string
)

// Hit decides one Hit: own pending claim, GCRA over every charge on the
// server's clock, then the claim (hit.lua). Build its call with HitCall.
var Hit = newScript("hit", claimLua+"\n"+hitLua)

// Settle commits or releases a batch of claims, each with its own result
// (settle.lua). Build its call with SettleCall.
var Settle = newScript("settle", claimLua+"\n"+settleLua)

// Present reports which claims have a live record (present.lua), for
// tests and tools: build its KEYS with PresentCall.
var Present = newScript("present", claimLua+"\n"+presentLua)

func newScript(name, src string) *Script {
	sum := sha1.Sum([]byte(src))
	return &Script{Name: name, Source: src, SHA1: hex.EncodeToString(sum[:])}
}
