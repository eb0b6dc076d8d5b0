package scripts

import (
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
)

// Script is one Lua script: its source and the SHA1 that EVALSHA names it
// by.
type Script struct {
	Name   string // "hit", "settle", "present" or "peek"
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
	//go:embed peek.lua
	peekLua string
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

// Peek reads the reset-after of a tenant's buckets, writing nothing
// (peek.lua, a no-writes script: the server refuses its writes). Build its
// call with PeekCall. It stands alone: its first line must be the
// shebang, so it is not loaded after claim.lua, which it does not need.
var Peek = newScript("peek", peekLua)

func newScript(name, src string) *Script {
	sum := sha1.Sum([]byte(src))
	return &Script{Name: name, Source: src, SHA1: hex.EncodeToString(sum[:])}
}
