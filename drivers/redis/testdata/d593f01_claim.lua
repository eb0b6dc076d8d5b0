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
