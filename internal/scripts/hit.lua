-- hit.lua: one Hit of CONTRACT §3–§4 (G1–G9, C1–C4), atomically, in one
-- round trip. The GCRA is package gcra's Charge, transcribed. It is the
-- body of a function of (KEYS, ARGV, now): now is the server's clock in µs
-- (CONTRACT G8: every node of the fleet shares it), read once by the
-- script call (C.now), which may decide a round of calls at one now.
--
-- KEYS[1]   the tenant's shard 0, PREFIX:{T}:s0: its TATs (field: the
--           kind's TAT field, value: TAT in µs), its claim state s and
--           the records of a tenant of one bucket (package scripts' doc)
-- KEYS[2]   the claim's short key PREFIX:{T}D (D: the claim's digest),
--           absent when the Hit has no claim; the tenant's other shards
--           PREFIX:{T}:s<i> are named after its tag (same slot)
-- ARGV[1]   n, the number of charges (0 or more)
-- then each charge's arguments in order, from ARGV[2]: a GCRA charge's
--   its kind's TAT field (K:, ending ':')
--   increment, µs (integer ≥ 1)
--   capacity, µs (integer ≥ increment, ≤ 366 days)
-- or a calendar quota's window charge (CONTRACT §3.2)
--   its kind's window field (K#, ending '#')
--   cost (integer ≥ 1)
--   max (integer ≥ cost, ≤ 2^50)
--   edges E0 < E1 < E2 < E3, µs: the windows [E0, E1), [E1, E2), [E2, E3)
-- when KEYS[2] is given, after the charges:
--   hook_id
--   pending TTL, µs (exact: the claim's own expiry)
--
-- Returns {code, value, r_1, ..., r_n, u_1, ..., u_w}: code 1 OK (value
-- 0), 2 Duplicate (value the committer's hook_id), 3 Pending or 4
-- RateLimited (value the retry-after in ms); r_i is charge i's
-- reset-after, µs (CONTRACT G10): a bucket's TAT lead over now after the
-- decision, the new TAT's when the charges were taken, the stored one's
-- when nothing was; a window's time left until its end (≥ 1). u_j is the
-- count after the decision of the j-th window charge: the Hit's cost
-- included when the charges were taken. Integers and strings only.
--
-- A window charge counts in the window that holds now, the server's
-- clock (G8); when none does, the script raises an error and writes
-- nothing. Its count is field K# of shard 0, "START END COUNT" (decimal:
-- the window's start and end, µs, and the units counted in it). A count
-- is keyed by its START (CONTRACT §3.2): one whose START is the window's
-- is this window's until its END, whatever that END. Windows of two
-- periods that start together share it. A count of another START is a
-- passed window's: 0 units in this one. A write stores the charged
-- window's END, so the count lasts to the end of the window charged.
--
-- Lua numbers are doubles: integers are exact below 2^53 µs (≈ 285 years
-- past 1970). Every value here is at most now + 2 × 366 days (≈ 1.9e15 µs
-- today), so the arithmetic below is exact integer arithmetic. Numbers go
-- to redis.call as strings of their decimal digits (C.int): given a Lua
-- number, Redis would write it with %.17g, exact but a floating-point
-- print several times the cost, and tostring() would write %.14g
-- (1.78e+15) and lose digits. Numbers come in as strings and are
-- converted by arithmetic (ARGV[i] + 0), one string-to-number conversion
-- where tonumber() makes two.

-- How many charges.
local n = ARGV[1] + 0

-- out is the reply, {code, value, r_1, ..., r_n, u_1, ..., u_w}, made at
-- 8 entries and cut below (the server's reply ends at the first nil; a
-- third window charge grows it): r_i starts as charge i's
-- stored TAT's lead over now (0 for none: a full bucket), what every
-- answer but a charged OK reports (G10), and each return sets the code
-- and value. The charges below are reckoned in leads: max(tat, now) is
-- now + r_i.
local out = {0, 0, 0, 0, 0, 0, 0, 0}
-- One HMGET of shard 0 reads the charges' TATs and counts, the claim's
-- field D and the tenant's state s (C.read_state: e0, shard 0's expiry,
-- which every write keeps at or past the latest TAT and window end, so no
-- PTTL is needed to know whether to lengthen it). q is the HMGET's
-- fields, made at their largest (4 charges, D, s) and sent cut. at[i] is
-- where charge i's arguments start, negated for a window charge; c is
-- where the claim's start. A window charge keeps what it needs in the
-- reply and in q, once sent: its end is now + r_i, its count before the
-- decision u_j, and q[i] its count's "START END ", for the write.
local s0, short = KEYS[1], KEYS[2]
local q = {0, 0, 0, 0, 0, 0}
local at = {0, 0, 0, 0}
local c, nw = 2, 0
for i = 1, n do
  local f = ARGV[c]
  q[i] = f
  if byte(f, -1) == 35 then -- '#'
    at[i] = -c
    nw = nw + 1
    c = c + 7
  else
    at[i] = c
    c = c + 3
  end
end
for i = n + nw + 3, 8 do
  out[i] = nil
end
local d
local nq = n + 1
if short then
  d = sub(short, -16)
  q[nq] = d
  nq = nq + 1
end
q[nq] = 's'
local m = call('HMGET', s0, unpack(q, 1, nq))
local j = n + 2
for i = 1, n do
  local v = m[i]
  local a = at[i]
  if a < 0 then
    -- A window charge: the window holding now, and its count.
    local en, ss, es = C.window(ARGV, -a, now)
    local p = ss .. ' ' .. es .. ' '
    q[i] = p
    out[i + 2] = en - now
    j = j + 1
    out[j] = v and C.window_count(v, p, ss, now) or 0
  elseif v then
    -- Anything but the decimal digits this script writes is some other
    -- program's value under our prefix: refuse rather than guess (V4).
    if not find(v, '^%d+$') then
      error('fleetstore: malformed bucket TAT')
    end
    v = v + 0
    if v > now then
      out[i + 2] = v - now
    end
  end
end

-- held is the state of a live claim record, holder its hook_id; both nil
-- when the Hit has no claim or no live record (an expired one is absent).
-- loc is where the record is or goes (claim.lua's C.locate).
local held, holder, expires, loc
if short then
  held, holder, expires, loc = C.locate(short, false, d, s0, m[n + 1], m[nq], now)
  -- Our own pending claim: this is a retry of a hit whose reply was lost.
  -- It was charged once already, so charge nothing and say OK (C2).
  if held == 'p' and holder == ARGV[c] then
    out[1] = 1
    return out
  end
end

-- The charges, checked before the claim (a denial says RateLimited even
-- for a duplicate). gcra.Charge: t = max(tat, now); new_tat = t + I;
-- allow = new_tat - C, conforming when allow <= now: as leads over now,
-- allow - now = r_i + I - C. A window charge conforms when its count
-- and cost are at most max; its wait is the time left in the window. wait
-- is the longest wait of the charges that do not conform.
local wait = 0
j = n + 2
for i = 1, n do
  local a = at[i]
  local over
  if a < 0 then
    j = j + 1
    over = out[j] + ARGV[1 - a] - ARGV[2 - a]
    if over > 0 then
      over = out[i + 2]
    end
  else
    over = out[i + 2] + ARGV[a + 1] - ARGV[a + 2]
  end
  if over > wait then
    wait = over
  end
end
-- All or nothing (G3): one denial writes nothing and reports the longest
-- wait in whole ms, rounded up, at least 1 (gcra.RetryAfterMillis, G2).
-- wait < 2^53 and the quotient is far from the next integer, so floor of
-- the double division is the integer division.
if wait > 0 then
  local ms = 1
  if wait > 1000 then
    ms = floor((wait + 999) / 1000)
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
  local ms = floor((expires - now + 999) / 1000)
  if ms < 1 then
    ms = 1
  end
  out[1], out[2] = 3, ms
  return out
end

-- Every charge conforms and the claim is free: write. Each kind's new
-- TAT goes to its field of shard 0; r_i becomes the new TAT's lead (≥ I),
-- the reset-after of a charge taken. Each window's count, with the cost
-- added, goes to its field; u_j becomes it. w is the fields and values,
-- made at their largest and sent cut to n; tat is the ms, rounded up, of
-- the latest new TAT and window end, which shard 0's expiry must reach (a
-- passed TAT is a full bucket, G7, and a passed window's count is 0:
-- shard 0 may expire once both have passed).
local w = {0, 0, 0, 0, 0, 0, 0, 0}
local last, top = 0, 0
j = n + 2
for i = 1, n do
  local a = at[i]
  if a < 0 then
    a = -a
    j = j + 1
    local k = out[j] + ARGV[a + 1]
    out[j] = k
    local en = now + out[i + 2]
    w[2 * i] = C.pair(q[i], k)
    if en > top then
      top = en
    end
  else
    local lead = out[i + 2] + ARGV[a + 1]
    out[i + 2] = lead
    if lead > last then
      last = lead
    end
    w[2 * i] = C.int(now + lead)
  end
  w[2 * i - 1] = ARGV[a]
end
local tat = floor((max(now + last, top) + 999) / 1000)
if short then
  -- The claim becomes pending for this hook, for the pending TTL (C1):
  -- its record and the TATs in one HSET when it goes to shard 0.
  C.put_claim(loc, 'P', ARGV[c], now + ARGV[c + 1], now, w, 2 * n, tat)
elseif n > 0 then
  local e0, x0, l, p = false, false, 0, 0
  if m[nq] then
    e0, x0, l, p = C.read_state(m[nq], true)
  end
  C.put_tats(s0, e0, x0, l, p, w, 2 * n, tat)
end
out[1] = 1
return out
