-- settle.lua: a batch Commit or Release of CONTRACT §4 (C5–C8, C10), each
-- claim decided on its own, in one round trip.
--
-- KEYS[i]     claim i's key (i = 1..#KEYS)
-- ARGV[1]     'c' to commit, 'r' to release
-- for claim i:
--   ARGV[2i]    hook_id
--   ARGV[2i+1]  TTL, ms (rounded up by the caller; used by commit)
--
-- Returns a flat array of two entries per claim, in order: a code and the
-- holder's hook_id ('' unless the code is 1).
--   0  settled, or nothing to do
--   1  held by another hook (ErrClaimLost)
--   2  release of a committed claim (ErrAlreadyCommitted)
local commit = ARGV[1] == 'c'
local out = {}
for i = 1, #KEYS do
  local hook = ARGV[2 * i]
  local code, who = 0, ''
  -- false when absent or expired (Redis has already dropped it).
  local v = redis.call('GET', KEYS[i])
  local st, holder
  if v then
    st, holder = decode_claim(v)
  end
  if v and holder ~= hook then
    -- Held by another hook, pending or committed: no change (C8).
    code, who = 1, holder
  elseif commit then
    -- Ours and committed already: no change, no error (C6). Otherwise
    -- (ours pending, or absent: the hook is durable, record it) commit
    -- for TTL from now (C5, C7).
    if st ~= 'c' then
      redis.call('SET', KEYS[i], encode_committed(hook), 'PX', ARGV[2 * i + 1])
    end
  elseif st == 'c' then
    -- Release of our committed claim: no change (C6).
    code = 2
  elseif v then
    -- Release of our pending claim: delete it (C5). Absent: nothing (C7).
    redis.call('DEL', KEYS[i])
  end
  out[2 * i - 1] = code
  out[2 * i] = who
end
return out
