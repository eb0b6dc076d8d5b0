package scripts

import (
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
	"strings"
)

// Script is one Lua script: its source and the SHA1 that EVALSHA names it
// by, and the function that FCALL names it by in [Library].
type Script struct {
	Name     string // "hit", "settle", "round", "present", "peek" or "reset"
	Source   string
	SHA1     string // lower-case hex, as SCRIPT LOAD returns it
	Function string // fleetstore_<version>_<name>, the version Library's
}

var (
	//go:embed claim.lua
	claimLua string
	//go:embed hit.lua
	hitLua string
	//go:embed settle.lua
	settleLua string
	//go:embed round.lua
	roundLua string
	//go:embed present.lua
	presentLua string
	//go:embed peek.lua
	peekLua string
	//go:embed reset.lua
	resetLua string
)

// Hit decides one Hit: own pending claim, GCRA over every charge on the
// server's clock, then the claim (hit.lua). Build its call with HitCall.
var Hit = newScript("hit", claimLua+"\n"+body("hit")+"C.init()\nreturn hit(KEYS, ARGV, C.now())\n")

// Settle commits or releases a batch of claims, each with its own result
// (settle.lua). Build its call with SettleCall.
var Settle = newScript("settle", claimLua+"\n"+body("settle")+"C.init()\nreturn settle(KEYS, ARGV, C.now())\n")

// Round decides a round of Hit and Settle calls in order, at one now,
// each with its own reply (round.lua). Build its call with a RoundCall.
var Round = newScript("round", claimLua+"\n"+body("hit")+body("settle")+body("round")+
	"C.init()\nreturn round(KEYS, ARGV, C.now())\n")

// bodies are the sources of the scripts that are the bodies of a function
// of (KEYS, ARGV, now), and body is one such function's definition. round
// calls hit and settle: it comes after them.
var bodies = map[string]string{"hit": hitLua, "settle": settleLua, "round": roundLua}

func body(name string) string {
	return "local function " + name + "(KEYS, ARGV, now)\n" + bodies[name] + "\nend\n"
}

// Present reports which claims have a live record (present.lua), for
// tests and tools: build its KEYS with PresentCall.
var Present = newScript("present", claimLua+"\n"+presentLua)

// Reset deletes a tenant's TATs (reset.lua). Build its call with
// ResetCall. It stands alone, as peek.lua: it needs none of claim.lua.
var Reset = newScript("reset", resetLua)

// Peek reads the reset-after of a tenant's buckets, writing nothing
// (peek.lua, a no-writes script: the server refuses its writes). Build its
// call with PeekCall. It stands alone: its first line must be the
// shebang, so it is not loaded after claim.lua, which it does not need.
var Peek = newScript("peek", peekLua)

func newScript(name, src string) *Script {
	sum := sha1.Sum([]byte(src))
	return &Script{Name: name, Source: src, SHA1: hex.EncodeToString(sum[:])}
}

// Library is the function library of the scripts, for FUNCTION LOAD
// (Redis 7.0 or later, Valkey): claim.lua once, then each script's source
// as the body of its function, registered as Script.Function (peek with
// the no-writes flag). A library's code runs once, when it loads, where a
// script called with EVALSHA runs claim.lua's definitions at every call.
// Its name and its functions' names hold the version, the first 64 bits
// of the SHA1 of the sources (lower-case hex): a server may hold the
// libraries of several versions of this package, each calling its own
// code, and a library of one name is always the same code.
var Library = newLibrary([]*Script{Hit, Settle, Round, Present, Peek, Reset})

// Lib is a function library: its name and its source.
type Lib struct {
	Name   string // fleetstore_<version>
	Source string // "#!lua name=fleetstore_<version>", then the code
}

func newLibrary(all []*Script) *Lib {
	// peek stands alone as a script; in the library, claim.lua's locals
	// hide the globals of their names (unpack), which C.init fills. The
	// scripts of bodies read the clock once, in their function's callback.
	alone := map[string]string{"present": presentLua, "reset": "C.init()\n" + resetLua,
		"peek": "C.init()\n" + strings.TrimPrefix(peekLua, "#!lua flags=no-writes\n")}
	var code strings.Builder
	code.WriteString(claimLua)
	for _, s := range all {
		if src, ok := alone[s.Name]; ok {
			// KEYS and ARGV, globals in a script, are the function's arguments.
			code.WriteString("\nlocal function " + s.Name + "(KEYS, ARGV)\n" + src + "\nend\n")
		} else {
			code.WriteString("\n" + body(s.Name))
		}
	}
	sum := sha1.Sum([]byte(code.String()))
	lib := &Lib{Name: "fleetstore_" + hex.EncodeToString(sum[:8])}
	for _, s := range all {
		s.Function = lib.Name + "_" + s.Name
		callback := s.Name
		if _, ok := alone[s.Name]; !ok {
			callback = "function(KEYS, ARGV) C.init() return " + s.Name + "(KEYS, ARGV, C.now()) end"
		}
		flags := ""
		if s == Peek {
			flags = ", flags = {'no-writes'}"
		}
		code.WriteString("redis.register_function{function_name = '" + s.Function +
			"', callback = " + callback + flags + "}\n")
	}
	lib.Source = "#!lua name=" + lib.Name + "\n" + code.String()
	return lib
}
