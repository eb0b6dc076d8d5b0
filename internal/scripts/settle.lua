-- settle.lua: a batch Commit or Release of CONTRACT §4 (C5–C8, C10), each
-- claim decided on its own, in one round trip. It is the body of a
-- function of (KEYS, ARGV, now), as hit.lua: a record's expiry is reckoned
-- by now.
--
-- for claim i (i = 1..#KEYS):
--   KEYS[i]     its short key PREFIX:{T}D (D: the claim's digest), whose
--               tag names its tenant's shards
--   ARGV[2i]    hook_id
--   ARGV[2i+1]  TTL, µs (exact: the committed record's expiry; used by commit)
-- ARGV[1]     'c' to commit, 'r' to release
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
  -- Nothing when absent or expired.
  local st, holder, _, loc = C.find_claim(KEYS[i], now)
  if st and holder ~= hook then
    -- Held by another hook, pending or committed: no change (C8).
    code, who = 1, holder
  elseif commit then
    -- Ours and committed already: no change, no error (C6). Otherwise
    -- (ours pending, or absent: the hook is durable, record it) commit
    -- for TTL from now (C5, C7).
    if st ~= 'c' then
      C.put_claim(loc, 'D', hook, now + ARGV[2 * i + 1], now)
    end
  elseif st == 'c' then
    -- Release of our committed claim: no change (C6).
    code = 2
  elseif st then
    -- Release of our pending claim: delete it (C5). Absent: nothing (C7).
    C.drop_claim(loc)
  end
  out[2 * i - 1] = code
  out[2 * i] = who
end
return out
