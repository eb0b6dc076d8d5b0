-- reset.lua: a Reset of CONTRACT G5, in one round trip: it deletes the
-- tenant's TATs, every field of its shard 0 that is neither a claim record
-- (a 16-byte digest) nor the shard's state s, and nothing else: claims
-- are not reset, and shard 0's expiry stays as it is (expiries are only
-- ever lengthened).
--
-- KEYS[1]   the tenant's shard 0, PREFIX:{T}:s0
--
-- Returns how many fields it deleted.
local fields = redis.call('HKEYS', KEYS[1])
local gone = {}
for i = 1, #fields do
  local f = fields[i]
  if #f ~= 16 and f ~= 's' then
    gone[#gone + 1] = f
  end
end
if #gone > 0 then
  redis.call('HDEL', KEYS[1], unpack(gone))
end
return #gone
