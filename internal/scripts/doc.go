// Package scripts holds the Lua scripts of the Redis-like drivers (Redis,
// Valkey) and the key layout they share, so that every such driver decides
// a Hit with the same code over the same keys. It depends on no client
// library: callers run the scripts with their own client (FCALL of their
// functions in [Library], EVAL of a script when its function is missing)
// and hand the reply, decoded into Go values (int64, string, []any), back
// to DecodeHit or DecodeSettle. The driver logic around the scripts
// (FCALL then EVAL, the library's load, batches, errors) is package
// internal/rediscore.
//
// The scripts are hit.lua (a Hit), settle.lua (a batch Commit or Release),
// round.lua (a round of group commit: Hits and settles in order, each by
// hit.lua's or settle.lua's code, with its own reply) and present.lua
// (which claims have a live record, for tests and tools), each loaded
// after claim.lua, the code of the claim layout below (a script cannot
// call another); peek.lua (a Peek: the buckets' reset-after and the quota
// counts) and reset.lua (a Reset: it deletes the TATs and quota counts)
// stand alone. peek.lua's first line declares it no-writes, so the server
// refuses any write it makes. hit.lua, settle.lua and round.lua are the
// bodies of functions of (KEYS, ARGV, now): a script call reads the
// server's clock once (C.now), so a round decides all its calls at one
// now. In the library, claim.lua comes once and each script is a function
// (peek's with the no-writes flag). CAP, PACKED and SLACK are claim.lua's
// constants.
//
// # Keys
//
// Every key of a tenant starts with its tag PREFIX:{T}, T being the tenant
// encoded by [Encode]; {T} is the cluster hash tag, so all of a tenant's
// keys share one slot:
//
//	PREFIX:{T}:s<i>    hash: claim shard i (decimal), D → record, and the
//	                   shard's state field s; shard 0 also holds the
//	                   tenant's TATs, K: → TAT (µs, decimal digits),
//	                   and its quota counts, K# → "START END COUNT"
//	PREFIX:{T}D        string: the record of claim D when it is too long
//	                   for a shard
//
// A script declares shard 0 (hit.lua, peek.lua, reset.lua) and each
// claim's PREFIX:{T}D; it derives the other shard keys from that key's tag
// (the same slot). Encode
// escapes every byte outside [A-Za-z0-9._~-] as %XX, so an encoded tenant
// holds no ':', '{' or '}' and tenants never share a key (CONTRACT V2).
//
// # Claim records
//
// A claim is named by D, its [ClaimDigest]: 16 raw bytes, the first 128
// bits of SHA-256 over the source's length (uvarint), the source and the
// key. The claims of one tenant are told apart by D alone (ClaimDigest
// gives the probability that two share one).
//
// A record is one string: the byte 'D' (committed) or 'P' (pending), the
// expiry in µs on the server's clock as 7 bytes big-endian (the first
// below 0x20: until the year 2540), then the hook_id (1–256 bytes); the
// node is not stored. A record whose expiry has passed is absent, whatever
// its key's expiry; the expiry is exact, so that Pending's retry-after is
// the time left rounded up (C3). Any other value where a record belongs,
// or an expiry further ahead than three 366-day TTLs, is a script error,
// never a decision (V4). [DecodeRecord] reads a record in Go.
//
// A record of at most PACKED (64) bytes, a hook_id of at most 56, is field
// D of one of the tenant's shards, small hashes the server keeps as
// listpacks (about 60 bytes per claim); a longer one, which would turn its
// shard into a hashtable, is the string PREFIX:{T}D. A lookup reads the
// field, then the string.
//
// # TATs
//
// The TAT of the tenant's bucket of kind K is field K: of shard 0, or K::
// for a kind of 15 bytes ([TATField]). A kind matches [a-z][a-z0-9_]{0,31},
// so a TAT field is never 16 bytes long (a record's) nor s, and names its
// kind alone. A Hit reads its charges' TATs, its claim's field D and the
// state s in one HMGET of shard 0. It writes the TATs, and its claim's
// record when that goes to shard 0, in one HSET. A new tenant's first
// write puts s first, then the TATs: the fields read on every Hit lead the
// listpack. A TAT that has passed is a full bucket (G7), absent to every
// script; its field stays until the kind's next charge overwrites it, or
// until shard 0 expires. Prunes and splits move and delete records alone:
// shard 0 keeps its TATs and quota counts. Reset deletes every field of
// shard 0 that is neither a record nor s.
//
// # Quota windows
//
// A calendar quota's count (CONTRACT §3.2) is field K# of shard 0, or K##
// for a kind of 15 bytes ([WindowField]). Its value is "START END COUNT":
// the start and end (µs) of the window last charged, and its units, in
// decimal. A Hit reads it in the HMGET that reads the TATs, and checks it
// with them before it writes anything. The window is the one of the three
// sent that holds the server's clock; when none does, the script raises an
// error. A count is keyed by its START: one whose START is the window's is
// the window's count until its END, whatever that END. So windows of two
// periods that start together share it, and two that only end together do
// not. A count of another START is a passed window's: the count is 0, and
// the next charge overwrites it, so a kind's counts take one field. A
// write stores the charged window's END. Shard 0 lives until that end,
// rounded up to the ms, like a TAT. Reset deletes the counts with the
// TATs.
//
// # Shard state
//
// Beside its records (16-byte fields), a shard holds one field of one
// byte, s, its state: binary, integers big-endian, in bytes
//
//	shard 0      'S'  l (1)  p (4)  e (6)  x (6)     18 bytes
//	shard i > 0  'S'  e (6)  x (6)                   13 bytes
//
//	l, p  the tenant's level and split pointer (linear hashing, below)
//	e     the shard key's expiry, ms on the server's clock, as the scripts
//	      last set it (PEXPIREAT): no PEXPIRETIME or PTTL is needed to
//	      know it
//	x     when the shard's next prune is due, ms (0: none)
//
// Reading a shard is one HMGET of D and s; a new shard gets s first, so
// that the listpack walk to it is short. s is written only when it
// changes: e at most once per SLACK, x at a prune, a split or a shard's
// first record, l and p at a split. A shard 0 without s is a new tenant
// (l = p = 0). Any other value of s is a script error (V4).
//
// # Buckets
//
// A tenant's claims are spread over 2^l + p buckets by linear hashing:
// with h the first 4 bytes of D (big-endian), claim D is in bucket
// h mod 2^l, or h mod 2^(l+1) when that is below p. While the tenant has
// one bucket it is shard 0; once it has split, bucket b is shard b + 1
// and shard 0 holds the state, the TATs and the quota counts alone. A
// lookup reads shard 0 (the state, and the record of a one-bucket tenant)
// and at most one more shard.
//
// Inserting a new field into a shard first prunes it when its prune is due
// (x); if it then holds CAP (120) fields or more, s included, bucket p
// splits: its live records with h mod 2^(l+1) = p + 2^l move to bucket
// p + 2^l, its expired ones are dropped, and p moves on (to 0, and l to
// l + 1, when it reaches 2^l). The first split moves all of shard 0's
// records. A shard other than the one split keeps growing until p reaches
// it (to about 140 fields), well below hash-max-listpack-entries (512 by
// default; package rediscore warns of a server set below what shards
// need). Shards are never merged: a tenant keeps the shards of its peak of
// live claims, each emptied one expiring.
//
// # Prunes
//
// A shard's prune is due once about an eighth of its records have
// expired: x is the expiry (ms, rounded up) of the ceil(n/8)-th of its n
// records to expire, as its last prune or split left them, or a first
// record's own expiry. So a shard holds about 1.14 fields per live record,
// a prune reads about 8 records per record it removes, and a shard full of
// live records splits without one.
//
// # Expiries
//
// Every write sets an expiry, and expiries are only ever lengthened. The
// string PREFIX:{T}D expires at its record's expiry's ms, rounded up
// (PXAT). A shard key lives until its latest record's expiry and at most
// SLACK (1 s) longer: its expiry is written (PEXPIREAT, and e) only when a
// record would outlive it, then SLACK past that record's, so at most once
// per SLACK per shard. Shard 0 lives until the latest record of every
// shard and until its latest TAT's ms, rounded up. So the tenant's state
// never expires before a record it places, and a TAT lives until it has
// passed. A record expired in a longer-lived shard is absent to every
// script and removed at the shard's next prune or split. [ShardRecords]
// lists a shard's live records and TATs, each with its own time to live:
// C9 and G7 bound records, not shard keys. Reset leaves shard 0's expiry
// as it is.
//
// The scripts use PEXPIRETIME, SET … PXAT and script flags: Redis 7.0 or
// later, or Valkey.
//
// The scripts read this layout only. README "Upgrading" says what a fleet
// whose TATs were in a hash PREFIX:{T}:b does across the change.
package scripts
