-- claim.lua: the claim record codec and the packed claim layout,
-- prepended to hit.lua, settle.lua and present.lua (a Redis script cannot
-- call another script, so the Go side concatenates the sources before
-- loading them). The layout — keys, record, shard state s (e, x, l, p),
-- linear hashing, prunes, expiries — is described in package scripts'
-- doc (doc.go); the names here are its names.

-- C holds the layout's constants and functions. A script called with
-- EVALSHA runs this source on every call (a function library, FCALL, once
-- when it loads), and defining a local function that captures many
-- locals costs the call a walk of the open upvalues per capture;
-- functions of a table capture one.
local C = {}

-- The functions of Lua's library and of Redis's API the scripts call, as
-- locals of this source (upvalues of its functions): a function library's
-- code reaches a global through its globals table's metatable, at every
-- use, and cannot read Lua's library while it loads (Redis 7.0, Valkey
-- 8.0), so C.init, the first line of every script, fills them at the first
-- call; call, redis.call, at every call. wide is whether Lua's %d writes
-- an integer below 2^53 in full (a C long of 64 bits).
local call, byte, sub, format, find, floor, max, unpack, pcall, type, wide
local spack, sunpack

function C.init()
  call = redis.call
  if not byte then
    byte, sub, format, find = string.byte, string.sub, string.format, string.find
    floor, max, unpack = math.floor, math.max, _G.unpack
    pcall, type = _G.pcall, _G.type
    spack, sunpack = struct.pack, struct.unpack
    wide = format('%d', 2 ^ 53) == '9007199254740992'
  end
end

-- now is the server's clock in µs (CONTRACT G8): one TIME per script
-- call, whatever the calls it decides.
function C.now()
  local t = call('TIME')
  return t[1] * 1000000 + t[2]
end

-- CAP is the number of fields at which a shard splits a bucket: well
-- below hash-max-listpack-entries (512 on the servers measured) so that an
-- unsplit shard stays a listpack (they reach about 140 fields), and small
-- enough that a prune (one HGETALL) stays short. A server configured below
-- about 150 turns some shards into hashtables (about 123 bytes per claim):
-- the driver warns of it.
C.CAP = 120
-- PACKED is the longest record kept as a field: hash-max-listpack-value's
-- default (64). A longer value would turn the whole shard into a hashtable.
C.PACKED = 64
-- SLACK is how long (ms) a shard key may outlive its latest record, so
-- that its expiry is written at most once per SLACK.
C.SLACK = 1000
-- DIGEST is the length of a record's field (the state's has one byte).
C.DIGEST = 16

-- encode_claim builds the record of a claim in state st ('D' committed,
-- 'P' pending) for hook until expires (µs, an integer below 2^53): the
-- state byte, the expiry as 7 bytes big-endian, the hook_id. Redis's
-- struct library packs it in one call (its integers are 64-bit: exact
-- for such a double).
function C.encode_claim(st, hook, expires)
  return spack('>c1I7c0', st, expires, hook)
end

-- int returns x, an integer from 0 to 2^53, as an argument of redis.call:
-- its decimal digits, since a number given to redis.call is written with
-- %.17g, exact but a floating-point print several times the cost; the
-- number itself where %d is narrower than 2^53.
function C.int(x)
  if wide then
    return format('%d', x)
  end
  return x
end

-- pair returns a window count's value, "START END COUNT": p, its start
-- and end as window_count takes them ("START END "), then k, its units,
-- an integer from 0 to 2^53 (%d where it is wide enough, else %.0f, exact
-- for such a double).
function C.pair(p, k)
  if wide then
    return format('%s%d', p, k)
  end
  return format('%s%.0f', p, k)
end

-- window returns the window holding now among the edges ARGV[a + 3] to
-- ARGV[a + 6] (a window charge's, hit.lua): its end (µs), and its start
-- and end as the arguments' own decimal digits. It raises a script
-- error, before anything is written, when no window holds now: the node
-- that sent them has a clock too far from the server's.
function C.window(ARGV, a, now)
  -- The edges are converted as the comparisons need them: two in the
  -- common case, now in the middle window.
  local e1 = ARGV[a + 4] + 0
  if now >= e1 then
    local e2 = ARGV[a + 5] + 0
    if now < e2 then
      return e2, ARGV[a + 4], ARGV[a + 5]
    end
    local e3 = ARGV[a + 6] + 0
    if now < e3 then
      return e3, ARGV[a + 5], ARGV[a + 6]
    end
  elseif now >= ARGV[a + 3] + 0 then
    return e1, ARGV[a + 3], ARGV[a + 4]
  end
  error("fleetstore: quota window: the store's clock is outside the windows sent")
end

-- window_count returns the units counted in the window holding now, from
-- v, a window field's value ("START END COUNT", decimal). p is the
-- window's "START END " and ss its START. A count is keyed by its START
-- (CONTRACT §3.2): one of this START is this window's, whatever its END,
-- until that END; one of another START is a passed window's, 0 here.
-- Anything else is some other program's value under our prefix: a script
-- error (V4). The common case, a count of this very window, compares
-- strings and converts the count alone.
function C.window_count(v, p, ss, now)
  local n = #p
  if #v <= n + 16 and find(v, p, 1, true) == 1 and find(v, '^%d+$', n + 1) then
    return sub(v, n + 1) + 0
  end
  local _, _, s, e, k = find(v, '^(%d+) (%d+) (%d+)$')
  if not s or #s > 16 or #e > 16 or #k > 16 then
    error('fleetstore: malformed quota count')
  end
  if s == ss and e + 0 > now then
    return k + 0
  end
  return 0
end

-- C.FAR is how far ahead of now (µs) a record's expiry can be: a claim's
-- TTL is at most 366 days; three of them, with room. A record further
-- ahead is not one this code wrote.
C.FAR = 3 * 366 * 86400 * 1000000

-- live_until returns the expiry (µs) of record v when it is live, nothing
-- when its expiry is at or before now, and raises a script error (an
-- error reply, never a wrong decision) when the value was not written by
-- encode_claim: anything else is some other program's value under our
-- prefix (V4).
function C.live_until(v, now)
  local n = #v
  local st = byte(v, 1)
  if (st ~= 68 and st ~= 80) or n < 9 or n > 264 then -- 'D', 'P'
    error('fleetstore: malformed claim record')
  end
  -- The expiry's first byte is below 0x20: below 2^53.
  local exp = sunpack('>I7', v, 2)
  if exp >= 9007199254740992 then
    error('fleetstore: malformed claim record')
  end
  if exp <= now then
    return nil
  end
  if exp - now > C.FAR then
    error('fleetstore: malformed claim record')
  end
  return exp
end

-- decode_claim returns the state ('p' pending or 'c' committed), the
-- hook_id and the expiry (µs) of a live record, nothing when it is not
-- live; a malformed record is a script error (live_until).
function C.decode_claim(v, now)
  local exp = C.live_until(v, now)
  if not exp then
    return nil
  end
  if byte(v, 1) == 80 then
    return 'p', sub(v, 9), exp
  end
  return 'c', sub(v, 9), exp
end

-- shard_key is the key of shard i of the tenant whose tag is tag
-- (PREFIX:{T} → PREFIX:{T}:s<i>; i is an integer below 2^34, written in
-- full digits by C.int: Lua's own number-to-string conversion is a %.14g,
-- a floating-point print several times its cost).
function C.shard_key(tag, i)
  if i == 0 then
    return tag .. ':s0'
  end
  return tag .. ':s' .. C.int(i)
end

-- shard_index is the bucket of digest d at level l and split pointer p.
function C.shard_index(d, l, p)
  local a, b, c, e = byte(d, 1, 4)
  local h = ((a * 256 + b) * 256 + c) * 256 + e
  local i = h % 2 ^ l
  if i < p then
    i = h % 2 ^ (l + 1)
  end
  return i
end

-- read_state parses a shard's state s (nil: none): e and x, and in shard 0
-- (zero true) l and p. Binary, so that reading it is one struct.unpack
-- (decimal digits cost a match and a tonumber each, several µs a call).
function C.read_state(v, zero)
  if not v then
    return nil
  end
  local n = zero and 18 or 13
  if #v ~= n or byte(v, 1) ~= 83 then
    error('fleetstore: malformed claim shard state')
  end
  if not zero then
    local e, x = sunpack('>I6I6', v, 2)
    return e, x
  end
  local l, p, e, x = sunpack('>BI4I6I6', v, 2)
  if l > 32 or p >= 2 ^ l then
    error('fleetstore: malformed claim shard state')
  end
  return e, x, l, p
end

-- bucket_key is the key of bucket b of loc's tenant at level l and split
-- pointer p: shard 0 while the tenant has one bucket, then shard b + 1.
function C.bucket_key(loc, b, l, p)
  if l == 0 and p == 0 then
    return loc.s0
  end
  if not loc.tag then
    loc.tag = sub(loc.short, 1, -17)
  end
  return C.shard_key(loc.tag, b + 1)
end

-- loc is the location of a claim (C.locate): every field it holds.
C.loc = {tag = false, short = false, d = false, s0 = false, l = 0, p = 0, e0 = false, x0 = false,
  shard = false, e = false, x = false, field = false, at = false, nx0 = false, cover = false}

-- find_claim returns the live record of the claim whose short key is
-- short (PREFIX:{T}D) — state, hook_id, expiry (µs), or nothing — and its
-- location (C.locate), reading shard 0's field D and state s.
function C.find_claim(short, now)
  local tag = sub(short, 1, -17)
  local d = sub(short, -16)
  local s0 = tag .. ':s0'
  local m = call('HMGET', s0, d, 's')
  return C.locate(short, tag, d, s0, m[1], m[2], now)
end

-- locate returns the live record of the claim whose short key is short,
-- tag and d its tenant's tag (false: bucket_key cuts it from short when a
-- split tenant needs it) and digest — state, hook_id, expiry (µs), or
-- nothing — and its location: a table the writes below take (the
-- tenant's tag, its state l and p and shard 0's e0 and x0; the claim's
-- shard and its e and x). v and sv are shard 0's field D and state s as
-- read (false: none), by find_claim or by the caller's own read (hit.lua
-- reads the TATs in the same HMGET). Shard 0 holds the state, and the
-- records of a tenant of one bucket: one read finds both. No state: a
-- tenant of one bucket (l = p = 0) whose state is not written yet.
function C.locate(short, tag, d, s0, v, sv, now)
  -- One table, C.loc, made once with every field loc ever holds, is
  -- filled anew: a script call uses one location at a time (settle.lua's
  -- claims one after the other), and a table made per claim costs an
  -- allocation and its collection (about 0.5 µs). false where there is
  -- none yet, which every use reads as it reads nil.
  local loc = C.loc
  loc.tag, loc.short, loc.d, loc.s0, loc.l, loc.p, loc.e0, loc.x0 = tag, short, d, s0, 0, 0, false, false
  loc.shard, loc.e, loc.x, loc.field, loc.at, loc.nx0, loc.cover = s0, false, false, false, false, false, false
  if sv then
    loc.e0, loc.x0, loc.l, loc.p = C.read_state(sv, true)
    if loc.l ~= 0 or loc.p ~= 0 then
      loc.shard = C.bucket_key(loc, C.shard_index(d, loc.l, loc.p), loc.l, loc.p)
    end
  end
  if loc.shard == s0 then
    loc.e, loc.x = loc.e0, loc.x0
  else
    local r = call('HMGET', loc.shard, d, 's')
    v = r[1]
    loc.e, loc.x = C.read_state(r[2])
  end
  loc.field = v and true or false
  if v then
    local st, hook, exp = C.decode_claim(v, now)
    if st then
      loc.at = 'f'
      return st, hook, exp, loc
    end
  end
  v = call('GET', short)
  if v then
    local st, hook, exp = C.decode_claim(v, now)
    if st then
      loc.at = 's'
      return st, hook, exp, loc
    end
  end
  return nil, nil, nil, loc
end

-- expiry returns the expiry (ms) to give key so that it lives until at
-- least at (ms): e, its expiry as recorded, when that already does, else
-- SLACK past at, or the key's own later expiry when none is recorded (a
-- shard being created, which may be an emptied one not yet expired).
function C.expiry(key, e, at)
  if e then
    if e >= at then
      return e
    end
    return at + C.SLACK
  end
  return max(at + C.SLACK, call('PEXPIRETIME', key))
end

-- rare defines the functions of the rare paths — a prune, a split, a
-- state write — when one is first needed in a script call: this source
-- runs on every call, and every function it defines costs the call its
-- closure (about 0.1 µs each, and the garbage).
function C.rare()
  if C.split then
    return
  end
  -- state is the value of a shard's state field: "S", then in shard 0 l (1
  -- byte) and p (4), then e and x (6 bytes each: ms below 2^48).
  function C.state(e, x, l, p)
    if l then
      return spack('>c1BI4I6I6', 'S', l, p, e, x)
    end
    return spack('>c1I6I6', 'S', e, x)
  end

  -- due returns when a prune of records whose expiries are exps (µs, any
  -- order) is next due, ms: once about an eighth of them have expired (the
  -- expiry of the ceil(n/8)-th to go), 0 when there are none. Between two
  -- prunes at most that eighth lingers expired (and what was inserted since
  -- with an earlier expiry), so a shard holds about 1.14 fields per live
  -- record at most; each prune reads its fields once per eighth of them
  -- gone, about 8 field reads per expired record.
  function C.due(exps)
    if #exps == 0 then
      return 0
    end
    table.sort(exps)
    return floor((exps[math.ceil(#exps / 8)] + 999) / 1000)
  end

  -- prune removes shard's expired records and returns how many are left and
  -- when the next prune is due (ms, 0: none); the caller writes it.
  function C.prune(shard, now)
    local all = call('HGETALL', shard)
    local dead, exps = {}, {}
    for j = 1, #all, 2 do
      if #all[j] == C.DIGEST then
        local exp = C.live_until(all[j + 1], now)
        if exp then
          exps[#exps + 1] = exp
        else
          dead[#dead + 1] = all[j]
        end
      end
    end
    if #dead > 0 then
      call('HDEL', shard, unpack(dead))
    end
    return #exps, C.due(exps)
  end

  -- split splits bucket p of loc's tenant (linear hashing, doc.go),
  -- dropping its expired records on the way; loc takes the new l and p, and
  -- put_claim writes them. It returns the state it wrote, key → {e, x}: the
  -- shards it moved records to, and the one it split unless that is shard 0
  -- (whose new x goes to loc.nx0, for put_claim to write).
  function C.split(loc, now)
    local l, p = loc.l, loc.p
    local hi = p + 2 ^ l
    local nl, np = l, p + 1
    if np == 2 ^ l then
      nl, np = l + 1, 0
    end
    local src = C.bucket_key(loc, p, l, p)
    local stay, dst = C.bucket_key(loc, p, nl, np), C.bucket_key(loc, hi, nl, np)
    local all = call('HGETALL', src)
    local gone, kept, moved, keptx, movedx = {}, {}, {}, {}, {}
    local se
    for j = 1, #all, 2 do
      local f, v = all[j], all[j + 1]
      if #f == C.DIGEST then
        local exp = C.live_until(v, now)
        if not exp then
          gone[#gone + 1] = f
        elseif C.shard_index(f, nl, np) == hi then
          gone[#gone + 1] = f
          moved[#moved + 1] = f
          moved[#moved + 1] = v
          movedx[#movedx + 1] = exp
        else
          kept[#kept + 1] = f
          kept[#kept + 1] = v
          keptx[#keptx + 1] = exp
        end
      elseif f == 's' then
        se = C.read_state(v, src == loc.s0)
      end
    end
    local wrote = {}
    -- put writes records (field, value pairs) expiring at exps (µs) into
    -- key, a new shard or an emptied one that has not expired yet: its
    -- state first.
    local function put(key, fv, exps)
      if #fv == 0 then
        return
      end
      local e = C.expiry(key, nil, floor((max(unpack(exps)) + 999) / 1000))
      local x = C.due(exps)
      call('HSET', key, 's', C.state(e, x), unpack(fv))
      call('PEXPIREAT', key, C.int(e))
      wrote[key] = {e, x}
      loc.cover = max(loc.cover or 0, e)
    end
    put(dst, moved, movedx)
    if stay ~= src then
      put(stay, kept, keptx)
      for j = 1, #kept, 2 do
        gone[#gone + 1] = kept[j]
      end
      keptx = {}
    end
    if #gone > 0 then
      call('HDEL', src, unpack(gone))
    end
    if src == loc.s0 then
      loc.nx0 = C.due(keptx)
    else
      local e = se
      if not e then
        local pe = call('PEXPIRETIME', src)
        if pe > 0 then
          e = pe
        end
      end
      if e then
        local x = C.due(keptx)
        call('HSET', src, 's', C.state(e, x))
        wrote[src] = {e, x}
      end
    end
    loc.l, loc.p = nl, np
    return wrote
  end
end

-- put_claim writes the record of loc's claim: state st ('D' or 'P') for
-- hook until expires (µs), as a field of its shard or, when the record is
-- longer than PACKED, as its short key; and the TATs a Hit charged, when
-- nw > 0: w[1] to w[nw], field and value pairs of shard 0, tat the latest
-- one's ms. A new field first prunes its shard when that is due, then
-- splits a bucket when the shard is full. Shard 0 is made to outlive the
-- record, wherever it is, and the TATs, and is given the state when it had
-- none (a new tenant).
function C.put_claim(loc, st, hook, expires, now, w, nw, tat)
  nw = nw or 0
  local v = C.encode_claim(st, hook, expires)
  local at = floor((expires + 999) / 1000)
  if #v > C.PACKED then
    call('SET', loc.short, v, 'PXAT', C.int(at))
    if nw > 0 then
      C.put_tats(loc.s0, loc.e0, loc.x0, loc.l, loc.p, w, nw, tat)
    end
    return
  end
  -- e and x: the claim shard's state as the server holds it (nil: none);
  -- nx its x after this write.
  local e, x = loc.e, loc.x
  local nx = x
  local moved = false -- l or p changed
  if not loc.field then
    local left
    if x and x > 0 and now >= x * 1000 then
      C.rare()
      left, nx = C.prune(loc.shard, now)
      left = left + 1 -- and the state field, as HLEN counts
      if loc.shard == loc.s0 then
        loc.nx0 = nx
      end
    else
      left = call('HLEN', loc.shard)
    end
    if left >= C.CAP then
      C.rare()
      local wrote = C.split(loc, now)
      moved = true
      -- The claim's shard: where it was, or, when its bucket was the one
      -- split, where split wrote (nothing written: an empty shard).
      local key = C.bucket_key(loc, C.shard_index(loc.d, loc.l, loc.p), loc.l, loc.p)
      if key == loc.s0 then
        e, x, nx = loc.e0, loc.x0, loc.nx0 or loc.x0
      elseif wrote[key] then
        e, x = wrote[key][1], wrote[key][2]
        nx = x
      elseif key ~= loc.shard then
        e, x, nx = nil, nil, nil
      end
      loc.shard = key
    end
    if not nx or nx == 0 then
      -- The shard's first record (since its last prune): prune when it
      -- has expired.
      nx = at
    end
  end
  -- Shard 0's expiry must cover the record, wherever it is, the records
  -- a split moved and the TATs. Each state is written only when it
  -- changed (a new tenant's shard 0 has none: e0 ~= nil).
  local e0 = C.expiry(loc.s0, loc.e0, max(at, loc.cover or 0, tat or 0))
  local nx0 = loc.nx0 or loc.x0 or 0
  if loc.shard == loc.s0 then
    nx0 = nx or 0
  end
  local s0 = false
  if moved or e0 ~= loc.e0 or nx0 ~= loc.x0 then
    C.rare()
    s0 = C.state(e0, nx0, loc.l, loc.p)
  end
  if loc.shard == loc.s0 then
    C.hset(loc.s0, s0, w, nw, loc.d, v)
  else
    local ne = C.expiry(loc.shard, e, at)
    if ne ~= e or nx ~= x then
      C.rare()
      call('HSET', loc.shard, 's', C.state(ne, nx or 0), loc.d, v)
    else
      call('HSET', loc.shard, loc.d, v)
    end
    if ne ~= e then
      call('PEXPIREAT', loc.shard, C.int(ne))
    end
    if s0 or nw > 0 then
      C.hset(loc.s0, s0, w, nw)
    end
  end
  if e0 ~= loc.e0 then
    call('PEXPIREAT', loc.s0, C.int(e0))
  end
end

-- put_tats writes a Hit's TATs, w[1] to w[nw] (field and value pairs),
-- into shard 0, key s0, whose state is e0, x0, l and p as read (e0 false:
-- no state), and makes shard 0 outlive the latest TAT's ms, tat: its
-- expiry and its state's e are written only when it would not, then SLACK
-- past tat.
function C.put_tats(s0, e0, x0, l, p, w, nw, tat)
  local e = C.expiry(s0, e0, tat)
  if e == e0 then
    call('HSET', s0, unpack(w, 1, nw))
    return
  end
  C.rare()
  C.hset(s0, C.state(e, x0 or 0, l or 0, p or 0), w, nw)
  call('PEXPIREAT', s0, C.int(e))
end

-- hset writes into shard key its state sv first, when given (a new
-- shard 0's state leads its listpack, so that the walk to it is short),
-- then w[1] to w[nw] (field and value pairs: TATs), then field f, value
-- v, when f is given: one HSET, its arguments in a table made at their
-- largest (state, 4 TATs, a record) once.
function C.hset(key, sv, w, nw, f, v)
  if not sv and nw == 0 then
    call('HSET', key, f, v)
    return
  end
  local a = {false, false, false, false, false, false, false, false, false, false, false, false}
  local k = 0
  if sv then
    a[1], a[2] = 's', sv
    k = 2
  end
  for i = 1, nw do
    a[k + i] = w[i]
  end
  k = k + nw
  if f then
    a[k + 1], a[k + 2] = f, v
    k = k + 2
  end
  call('HSET', key, unpack(a, 1, k))
end

-- drop_claim deletes loc's live record (a release of a pending claim).
function C.drop_claim(loc)
  if loc.at == 'f' then
    call('HDEL', loc.shard, loc.d)
  elseif loc.at == 's' then
    call('DEL', loc.short)
  end
end
