-- claim.lua: the claim record codec, prepended to hit.lua and settle.lua
-- (a Redis script cannot call another script, so the Go side concatenates
-- the sources before loading them).
--
-- A claim key holds one string, as short as it can be (CONTRACT §7): the
-- state byte, then for a pending claim ('q') its expiry in µs on the
-- server's clock as exactly 16 decimal digits, then the hook_id (1–256
-- bytes, the rest of the string, any bytes):
--
--   c<hook_id>                  committed by hook_id
--   q<16-digit expiry><hook_id> pending for hook_id
--
-- The node is not stored: nothing reads it back. The pending expiry is
-- exact, so that a Pending's retry-after is the remaining time rounded up
-- (C3), which the key's PTTL, one ms longer (see Millis), overstates.

-- encode_committed builds the record of a claim committed by hook.
local function encode_committed(hook)
  return 'c' .. hook
end

-- encode_pending builds the record of a claim pending for hook until
-- expires (µs, an integer below 10^16: year 2286). string.format pads it
-- to exactly 16 digits (tostring would write 1.78e+15).
local function encode_pending(hook, expires)
  return 'q' .. string.format('%016d', expires) .. hook
end

-- decode_claim returns the state ('p' pending or 'c' committed), the
-- hook_id and, for a pending claim, the expiry (µs) of a record, and
-- raises a script error (an error reply, never a wrong decision) when the
-- value was not written by encode_committed or encode_pending: anything
-- else is some other program's key under our prefix.
local function decode_claim(v)
  local st = string.sub(v, 1, 1)
  local n = #v
  if st == 'c' and n >= 2 and n <= 257 then
    return 'c', string.sub(v, 2)
  end
  if st == 'q' and n >= 18 and n <= 273 then
    -- Exactly 16 digits (tonumber alone would take " 5", "0x5" or "1e1").
    local exp = string.sub(v, 2, 17)
    if string.match(exp, '^%d+$') then
      return 'p', string.sub(v, 18), tonumber(exp)
    end
  end
  error('fleetstore: malformed claim record')
end
