-- round.lua: the calls of one round of group commit (package rediscore):
-- Hits and settles of one slot, each decided by its own script's code
-- (hit.lua, settle.lua), in order, at one now, as if each had been sent
-- alone. A call sees the writes of the calls before it (two Hits on one
-- bucket, or on one claim, as one after the other) and a denied Hit
-- writes nothing, so the others are decided as if it had not been sent.
-- The body of a function of (KEYS, ARGV, now), loaded after hit.lua's and
-- settle.lua's functions.
--
-- for each call, in order, from a = 1:
--   ARGV[a]    its script: 'h' hit, 's' settle
--   ARGV[a+1]  k, how many of KEYS are its own: the next k
--   ARGV[a+2]  m, how many of ARGV are its own: ARGV[a+3] to ARGV[a+m+2],
--              its script's ARGV; the next call's starts at a+m+3
--
-- Returns one entry per call, in order: its script's reply, or, when its
-- script raised an error (a malformed value, a command's error), the
-- error's text. A string, which no script's reply is: one call's error
-- is its own, never the others'.

local out = {}
local a, k, na = 1, 0, #ARGV
while a <= na do
  local nk, m = ARGV[a + 1] + 0, ARGV[a + 2] + 0
  local f = hit
  if ARGV[a] == 's' then
    f = settle
  end
  local ok, r = pcall(f, {unpack(KEYS, k + 1, k + nk)}, {unpack(ARGV, a + 3, a + m + 2)}, now)
  if not ok then
    -- A command's error is a table (its text in err); error()'s a string.
    if type(r) == 'table' then
      r = r.err
    end
    if type(r) ~= 'string' or r == '' then
      r = 'fleetstore: script error'
    end
  end
  out[#out + 1] = r
  a, k = a + m + 3, k + nk
end
return out
