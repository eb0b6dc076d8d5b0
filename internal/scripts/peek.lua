#!lua flags=no-writes
-- peek.lua: a Peek of CONTRACT G11, in one round trip: the reset-after of
-- some of a tenant's buckets as they stand on the server's clock, and the
-- count of its quota windows (CONTRACT §3.2), writing nothing. The
-- shebang's no-writes flag has the server refuse any write this script
-- might make (an expiry included), and lets it run on a replica or a
-- server out of memory: Redis 7.0 or later, or Valkey.
--
-- KEYS[1]   the tenant's shard 0, PREFIX:{T}:s0, which holds its TATs
--           (field: the kind's TAT field, value: TAT in µs) and its
--           window counts (hit.lua)
-- ARGV      each charge's arguments in order (1 to 4 charges): a bucket's
--           TAT field (K:), or a window's field (K#) and its edges E0 to
--           E3 (µs), as hit.lua takes them
--
-- Returns {r_1, ..., r_n, u_1, ..., u_w}: r_i is bucket i's TAT lead over
-- now, µs, 0 for a bucket absent or whose TAT has passed (a full bucket),
-- or window i's time left until its end; u_j is the j-th window's count,
-- 0 for none. A clock outside a window charge's edges is a script error,
-- as in hit.lua. Integers only; hit.lua's header says why the arithmetic
-- is exact.

-- The server's clock in µs (CONTRACT G8), as hit.lua reads it.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])

-- fields: one per charge, for one HMGET (a missing field, or hash, is
-- false); pos[i]: where charge i's arguments start.
local fields, pos = {}, {}
local a, na = 1, #ARGV
while a <= na do
  fields[#fields + 1] = ARGV[a]
  pos[#pos + 1] = a
  if string.byte(ARGV[a], -1) == 35 then -- '#': a window
    a = a + 5
  else
    a = a + 1
  end
end
local vals = redis.call('HMGET', KEYS[1], unpack(fields))
local out, used = {}, {}
for i = 1, #fields do
  local v = vals[i]
  a = pos[i]
  if string.byte(ARGV[a], -1) == 35 then
    local e0, e1, e2, e3 = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3]),
      tonumber(ARGV[a + 4])
    if now < e0 or now >= e3 then
      error("fleetstore: quota window: the store's clock is outside the windows sent")
    end
    local st, en = e2, e3
    if now < e1 then
      st, en = e0, e1
    elseif now < e2 then
      st, en = e1, e2
    end
    local k = 0
    if v then
      -- "START END COUNT", as hit.lua writes it: the count of this
      -- window's START until its END, whatever that END; another START is
      -- a passed window's.
      local ss, se, sk = string.match(v, '^(%d+) (%d+) (%d+)$')
      if not ss or #ss > 16 or #se > 16 or #sk > 16 then
        error('fleetstore: malformed quota count')
      end
      if tonumber(ss) == st and tonumber(se) > now then
        k = tonumber(sk)
      end
    end
    out[i] = en - now
    used[#used + 1] = k
  else
    local lead = 0
    if v then
      -- Anything but the decimal digits hit.lua writes is some other
      -- program's value under our prefix: refuse rather than guess (V4).
      if not string.match(v, '^%d+$') then
        error('fleetstore: malformed bucket TAT')
      end
      lead = math.max(tonumber(v) - now, 0)
    end
    out[i] = lead
  end
end
for j = 1, #used do
  out[#fields + j] = used[j]
end
return out
