#!lua flags=no-writes
-- peek.lua: a Peek of CONTRACT G11, in one round trip: the reset-after of
-- some of a tenant's buckets as they stand on the server's clock, writing
-- nothing. The shebang's no-writes flag has the server refuse any write
-- this script might make (an expiry included), and lets it run on a
-- replica or a server out of memory: Redis 7.0 or later, or Valkey.
--
-- KEYS[1]   the tenant's shard 0, PREFIX:{T}:s0, which holds its TATs
--           (field: the kind's TAT field, value: TAT in µs)
-- ARGV[i]   the TAT field of bucket i (1 to 4 of them)
--
-- Returns {r_1, ..., r_n}: r_i is bucket i's TAT lead over now, µs, 0 for
-- a bucket absent or whose TAT has passed (a full bucket). Integers only;
-- hit.lua's header says why the arithmetic is exact.

-- The server's clock in µs (CONTRACT G8), as hit.lua reads it.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])

-- One HMGET reads the kinds asked for; a missing field (or hash) is false.
local tats = redis.call('HMGET', KEYS[1], unpack(ARGV))
local out = {}
for i = 1, #ARGV do
  local v = tats[i]
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
return out
