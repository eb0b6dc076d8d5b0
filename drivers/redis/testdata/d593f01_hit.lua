-- claim.lua: the claim record codec and the packed claim layout,
-- prepended to hit.lua, settle.lua and present.lua (a Redis script cannot
-- call another script, so the Go side concatenates the sources before
-- loading them).
--
-- A claim's record is one string, as short as it can be (CONTRACT §7): the
-- state byte, its expiry in µs on the server's clock as exactly 16 decimal
-- digits, then the hook_id (1–256 bytes, the rest of the string, any
-- bytes):
--
--   C<16-digit expiry><hook_id> committed by hook_id
--   q<16-digit expiry><hook_id> pending for hook_id
--
-- A short key (below) may also hold c<hook_id>, a record committed by the
-- layout before shards, which kept no expiry in the value: it is read as
-- committed for as long as its key lives (its PX), and never written.
--
-- A record whose expiry has passed is absent, whatever its key's expiry
-- (a key only ever lengthens to its latest record's). The node is not
-- stored: nothing reads it back. The expiry is exact, so that a Pending's
-- retry-after is the remaining time rounded up (C3).
--
-- Where a record lives. Every claim of a tenant T is named by D, the
-- 16-byte digest of its source and key (the last 16 bytes of its short key
-- PREFIX:{T}D, which the Go side sends). A record of at most PACKED bytes
-- (a hook_id of at most 47 bytes) is field D of a shard, a small hash
-- PREFIX:{T}:s<i> that the server keeps as a listpack (about 70 bytes per
-- claim); a longer one is the string at the short key itself (the layout
-- before shards). A lookup reads both.
--
-- The shards of a tenant grow by linear hashing: PREFIX:{T}:n, a hash of
-- l (level) and p (split pointer), absent while the tenant has one shard
-- (l = 0). There are 2^l + p shards; claim D is in shard h mod 2^l, or h
-- mod 2^(l+1) when that is below p, h being D's first 4 bytes (big-endian).
-- Inserting a new field into a shard of CAP fields or more first removes
-- its expired fields; if it still holds CAP or more, shard p splits: its
-- fields with h mod 2^(l+1) = p + 2^l move to the new shard p + 2^l, then
-- p moves on (and l with it once p reaches 2^l). A split moves at most one
-- shard's fields; a shard that is not the one split keeps growing until p
-- reaches it, far below the server's listpack limit of 512 fields in
-- practice (see the layout test).
--
-- Expiry: every shard's and short key's expiry is its latest record's,
-- rounded up to the ms (PEXPIREAT: the key lives until at least then and
-- lingers less than 2ms), and only ever lengthened; the meta key's is the
-- latest of all its shards', so it never disappears before one of them.

-- CAP is the number of fields at which a shard prunes, then splits: well
-- below hash-max-listpack-entries (512 on the servers measured) so that an
-- unsplit shard stays a listpack (they reach about 140 fields), and small
-- enough that a prune (one HGETALL) stays short. A server configured below
-- about 150 turns some shards into hashtables (about 123 bytes per claim):
-- the driver warns of it.
local CAP = 120
-- PACKED is the longest record kept as a field: hash-max-listpack-value's
-- default (64). A longer value would turn the whole shard into a hashtable.
local PACKED = 64

-- encode_claim builds the record of a claim in state st ('C' committed,
-- 'q' pending) for hook until expires (µs, an integer below 10^16: year
-- 2286). string.format pads it to exactly 16 digits (tostring would write
-- 1.78e+15).
local function encode_claim(st, hook, expires)
  return st .. string.format('%016d', expires) .. hook
end

-- decode_claim returns the state ('p' pending or 'c' committed), the
-- hook_id and the expiry (µs; nil for an old committed record) of a live
-- record, nothing when its expiry is at or before now, and raises a script
-- error (an error reply, never a wrong decision) when the value was not
-- written by encode_claim (or, when old is true, by the layout before):
-- anything else is some other program's value under our prefix (V4).
local function decode_claim(v, now, old)
  local st = string.sub(v, 1, 1)
  local n = #v
  if old and st == 'c' and n >= 2 and n <= 257 then
    return 'c', string.sub(v, 2)
  end
  if (st == 'C' or st == 'q') and n >= 18 and n <= 273 then
    -- Exactly 16 digits (tonumber alone would take " 5", "0x5" or "1e1").
    local exp = string.sub(v, 2, 17)
    if string.match(exp, '^%d+$') then
      exp = tonumber(exp)
      if exp <= now then
        return nil
      end
      if st == 'q' then
        return 'p', string.sub(v, 18), exp
      end
      return 'c', string.sub(v, 18), exp
    end
  end
  error('fleetstore: malformed claim record')
end

-- shard_key is the key of shard i of the tenant whose meta key is meta
-- (PREFIX:{T}:n → PREFIX:{T}:s<i>; i is a small integer, which Lua writes
-- in full digits).
local function shard_key(meta, i)
  return string.sub(meta, 1, -2) .. 's' .. i
end

-- shard_index is the shard of digest d at level l and split pointer p.
local function shard_index(d, l, p)
  local a, b, c, e = string.byte(d, 1, 4)
  local h = ((a * 256 + b) * 256 + c) * 256 + e
  local i = h % 2 ^ l
  if i < p then
    i = h % 2 ^ (l + 1)
  end
  return i
end

-- shard_state reads the tenant's level and split pointer (0, 0 while the
-- meta key is absent); anything but the digits this code writes is an
-- error (V4).
local function shard_state(meta)
  local m = redis.call('HMGET', meta, 'l', 'p')
  if not m[1] and not m[2] then
    return 0, 0
  end
  if not (m[1] and m[2] and string.match(m[1], '^%d+$') and string.match(m[2], '^%d+$')) then
    error('fleetstore: malformed claim shard state')
  end
  local l, p = tonumber(m[1]), tonumber(m[2])
  if l > 32 or p >= 2 ^ l then
    error('fleetstore: malformed claim shard state')
  end
  return l, p
end

-- find_claim returns the live record of the claim whose meta key is meta
-- and short key is short — state, hook_id, expiry (µs), or nothing — and
-- its location: a table the writes below take.
local function find_claim(meta, short, now)
  local d = string.sub(short, -16)
  local l, p = shard_state(meta)
  local loc = {meta = meta, short = short, d = d, l = l, p = p}
  loc.shard = shard_key(meta, shard_index(d, l, p))
  local v = redis.call('HGET', loc.shard, d)
  loc.field = v and true or false
  if v then
    local st, hook, exp = decode_claim(v, now)
    if st then
      loc.at = 'f'
      return st, hook, exp, loc
    end
  end
  v = redis.call('GET', short)
  if v then
    local st, hook, exp = decode_claim(v, now, true)
    if st then
      loc.at = 's'
      return st, hook, exp, loc
    end
  end
  return nil, nil, nil, loc
end

-- lengthen sets key's expiry to at (ms on the server's clock) unless it is
-- later already: an expiry is only ever lengthened.
local function lengthen(key, at)
  if redis.call('PEXPIRETIME', key) < at then
    redis.call('PEXPIREAT', key, at)
  end
end

-- prune removes shard's expired fields and returns how many are left.
local function prune(shard, now)
  local all = redis.call('HGETALL', shard)
  local dead = {}
  for j = 1, #all, 2 do
    if not decode_claim(all[j + 1], now) then
      dead[#dead + 1] = all[j]
    end
  end
  if #dead > 0 then
    redis.call('HDEL', shard, unpack(dead))
  end
  return #all / 2 - #dead
end

-- split splits shard p of loc's tenant (linear hashing, see above),
-- dropping its expired fields on the way, and records the new level and
-- split pointer in loc and the meta key.
local function split(loc, now)
  local l, p = loc.l, loc.p
  local hi = p + 2 ^ l
  local src, dst = shard_key(loc.meta, p), shard_key(loc.meta, hi)
  local all = redis.call('HGETALL', src)
  local gone, moved, last = {}, {}, 0
  for j = 1, #all, 2 do
    local f, v = all[j], all[j + 1]
    local st, _, exp = decode_claim(v, now)
    if not st then
      gone[#gone + 1] = f
    elseif shard_index(f, l + 1, 0) == hi then
      gone[#gone + 1] = f
      moved[#moved + 1] = f
      moved[#moved + 1] = v
      last = math.max(last, exp)
    end
  end
  if #moved > 0 then
    redis.call('HSET', dst, unpack(moved))
    lengthen(dst, math.floor((last + 999) / 1000))
  end
  if #gone > 0 then
    redis.call('HDEL', src, unpack(gone))
  end
  p = p + 1
  if p == 2 ^ l then
    l, p = l + 1, 0
  end
  redis.call('HSET', loc.meta, 'l', l, 'p', p)
  if loc.l == 0 then
    -- The meta key is new: it must outlive shard 0 (the only shard until
    -- now) and the new one; put_claim lengthens it past every later write.
    lengthen(loc.meta, math.max(redis.call('PEXPIRETIME', src), math.floor((last + 999) / 1000)))
  end
  loc.l, loc.p = l, p
end

-- put_claim writes the record of loc's claim: state st ('C' or 'q') for
-- hook until expires (µs), as a field of its shard or, when the record is
-- longer than PACKED, as its short key. A new field in a full shard first
-- prunes it, then splits one shard.
local function put_claim(loc, st, hook, expires, now)
  local v = encode_claim(st, hook, expires)
  local at = math.floor((expires + 999) / 1000)
  if #v > PACKED then
    redis.call('SET', loc.short, v, 'PXAT', at)
    return
  end
  if not loc.field and redis.call('HLEN', loc.shard) >= CAP and prune(loc.shard, now) >= CAP then
    split(loc, now)
    loc.shard = shard_key(loc.meta, shard_index(loc.d, loc.l, loc.p))
  end
  redis.call('HSET', loc.shard, loc.d, v)
  lengthen(loc.shard, at)
  if loc.l > 0 then
    lengthen(loc.meta, at)
  end
end

-- drop_claim deletes loc's live record (a release of a pending claim).
local function drop_claim(loc)
  if loc.at == 'f' then
    redis.call('HDEL', loc.shard, loc.d)
  elseif loc.at == 's' then
    redis.call('DEL', loc.short)
  end
end

-- hit.lua: one Hit of CONTRACT §3–§4 (G1–G9, C1–C4), atomically, in one
-- round trip. The GCRA is package gcra's Charge, transcribed.
--
-- KEYS[1]   the tenant's bucket hash: field = kind, value = TAT in µs
-- KEYS[2]   the tenant's shard state key PREFIX:{T}:n; absent when the Hit
--           has no claim (the shards PREFIX:{T}:s<i> share its hash tag)
-- KEYS[3]   the claim's short key PREFIX:{T}D (D: the claim's digest)
-- ARGV[1]   n, the number of charges (0 or more)
-- for charge i = 1..n:
--   ARGV[3i-1]  kind
--   ARGV[3i]    increment, µs (integer ≥ 1)
--   ARGV[3i+1]  capacity, µs (integer ≥ increment, ≤ 366 days)
-- when KEYS[2] is given:
--   ARGV[3n+2]  hook_id
--   ARGV[3n+3]  pending TTL, µs (exact: the claim's own expiry)
--
-- Returns {code, value, r_1, ..., r_n}: code 1 OK (value 0), 2 Duplicate
-- (value the committer's hook_id), 3 Pending or 4 RateLimited (value the
-- retry-after in ms); r_i is charge i's reset-after, µs (CONTRACT G10): its
-- bucket's TAT lead over now after the decision, the new TAT's when the
-- charges were taken, the stored one's when nothing was. Integers and
-- strings only.
--
-- Lua numbers are doubles: integers are exact below 2^53 µs (≈ 285 years
-- past 1970). Every value here is at most now + 2 × 366 days (≈ 1.9e15 µs
-- today), so the arithmetic below is exact integer arithmetic. Numbers
-- go to redis.call as Lua numbers, which Redis (and Valkey) write with
-- %.17g: every integer below 2^53 in full digits, with no string.format
-- (the one left is encode_claim's, which pads a new claim's expiry to
-- its 16 digits). tostring() would write %.14g (1.78e+15) and lose
-- digits: it is never used on a number.

-- Redis < 5 replicates scripts verbatim and refuses writes after TIME
-- unless told to replicate effects; later versions always do (no-op).
if redis.replicate_commands then redis.replicate_commands() end

-- The server's clock in µs (CONTRACT G8): every node of the fleet shares it.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])

-- How many charges, and where the claim's arguments start.
local n = tonumber(ARGV[1])
local c = 3 * n + 2

-- The buckets as they stand. One HGETALL reads every kind's TAT, the
-- charged ones and the others: top, the latest TAT of all, is what the
-- hash's expiry already covers (every write below keeps the expiry at or
-- past its latest TAT), so no PTTL is needed to know whether to lengthen
-- it. tats[i] is charge i's stored TAT (0: absent, a full bucket). out is
-- the reply, {code, value, r_1, ..., r_n}: r_i starts as the stored TAT's
-- lead over now, what every answer but a charged OK reports (G10), and
-- each return sets the code and value.
local tats = {}
local out = {0, 0}
local top = 0
if n > 0 then
  local all = redis.call('HGETALL', KEYS[1])
  local stored = {}
  for j = 1, #all, 2 do
    local v = all[j + 1]
    -- Anything but the decimal digits this script writes is some other
    -- program's value under our prefix: refuse rather than guess (V4).
    if not string.match(v, '^%d+$') then
      error('fleetstore: malformed bucket TAT')
    end
    v = tonumber(v)
    stored[all[j]] = v
    if v > top then
      top = v
    end
  end
  for i = 1, n do
    local tat = stored[ARGV[3 * i - 1]] or 0
    tats[i] = tat
    out[i + 2] = math.max(tat - now, 0)
  end
end

-- held is the state of a live claim record, holder its hook_id; both nil
-- when the Hit has no claim or no live record (an expired one is absent).
-- loc is where the record is or goes (claim.lua's find_claim).
local held, holder, expires, loc
if KEYS[2] then
  held, holder, expires, loc = find_claim(KEYS[2], KEYS[3], now)
  -- Our own pending claim: this is a retry of a hit whose reply was lost.
  -- It was charged once already, so charge nothing and say OK (C2).
  if held == 'p' and holder == ARGV[c] then
    out[1] = 1
    return out
  end
end

-- The charges, checked before the claim (a denial says RateLimited even
-- for a duplicate). news[i] is charge i's new TAT when it conforms; wait
-- is the longest wait of the charges that do not.
local news = {}
local wait = 0
for i = 1, n do
  local inc = tonumber(ARGV[3 * i])
  local cap = tonumber(ARGV[3 * i + 1])
  -- gcra.Charge: t = max(tat, now); new_tat = t + I; allow = new_tat - C.
  local new_tat = math.max(tats[i], now) + inc
  local allow = new_tat - cap
  if allow <= now then
    news[i] = new_tat
  else
    wait = math.max(wait, allow - now)
  end
end
-- All or nothing (G3): one denial writes nothing and reports the longest
-- wait in whole ms, rounded up, at least 1 (gcra.RetryAfterMillis, G2).
-- wait < 2^53 and the quotient is far from the next integer, so floor of
-- the double division is the integer division.
if wait > 0 then
  local ms = 1
  if wait > 1000 then
    ms = math.floor((wait + 999) / 1000)
  end
  out[1], out[2] = 4, ms
  return out
end

-- The claim: committed by anyone is a Duplicate naming the committer (C4);
-- pending for another hook says when it frees (C3). Nothing is written.
if held == 'c' then
  out[1], out[2] = 2, holder
  return out
end
if held == 'p' then
  -- The claim's exact expiry, rounded up to whole ms.
  local ms = math.floor((expires - now + 999) / 1000)
  if ms < 1 then
    ms = 1
  end
  out[1], out[2] = 3, ms
  return out
end

-- Every charge conforms and the claim is free: write.
if n > 0 then
  -- Store each kind's new TAT in the tenant's hash.
  local fields = {}
  local last = 0
  for i = 1, n do
    fields[2 * i - 1] = ARGV[3 * i - 1]
    fields[2 * i] = news[i]
    last = math.max(last, news[i])
    -- The reset-after of a charge taken: the new TAT's lead (≥ I).
    out[i + 2] = news[i] - now
  end
  redis.call('HSET', KEYS[1], unpack(fields))
  -- The hash may expire once its latest TAT has passed (a passed TAT is a
  -- full bucket, G7): at that TAT's ms on the server's clock, rounded up
  -- (PEXPIREAT). Redis drops a key once its ms clock is past the expiry,
  -- so the hash lives until at least its latest TAT and lingers less than
  -- 2ms. The expiry is a function of the latest TAT alone, so the one the
  -- hash has is top's: lengthen it only when last's is later (a hash that
  -- did not exist has top 0).
  local at = math.floor((last + 999) / 1000)
  if at > math.floor((top + 999) / 1000) then
    redis.call('PEXPIREAT', KEYS[1], at)
  end
end
if KEYS[2] then
  -- The claim becomes pending for this hook, for the pending TTL (C1).
  put_claim(loc, 'q', ARGV[c], now + tonumber(ARGV[c + 1]), now)
end
out[1] = 1
return out
