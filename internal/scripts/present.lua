-- present.lua: which claims have a live record, for tests and tools that
-- check what the store holds (never on a Hit's path).
--
-- for claim i (i = 1..#KEYS):
--   KEYS[i]  its short key PREFIX:{T}D
--
-- Returns the 1-based indexes i of the claims with a live record, pending
-- or committed.
C.init()
local t = call('TIME')
local now = t[1] * 1000000 + t[2]
local out = {}
for i = 1, #KEYS do
  if C.find_claim(KEYS[i], now) then
    out[#out + 1] = i
  end
end
return out
