-- claim.lua: the claim record codec, prepended to hit.lua and settle.lua
-- (a Redis script cannot call another script, so the Go side concatenates
-- the sources before loading them).
--
-- A claim key holds one string: its state byte ('q' pending, 'c'
-- committed; 'p', pending without an expiry, is still read), the hook_id's
-- length as three decimal digits (hook_id is 1–256 bytes), the hook_id
-- itself, for a pending claim ('q') its expiry in µs on the server's clock
-- as exactly 16 decimal digits, then the node (0–256 bytes, the rest of
-- the string). Any byte may appear in hook_id or node: the length prefix,
-- not a separator, says where hook_id ends. The pending expiry is exact,
-- so that a Pending's retry-after is the remaining time rounded up (C3),
-- which the key's PTTL, one ms longer (see Millis), overstates.

-- encode_claim builds the record of a committed claim held by hook on node.
local function encode_claim(st, hook, node)
  -- string.format pads the length to exactly three digits ("007").
  return st .. string.format('%03d', #hook) .. hook .. node
end

-- encode_pending builds the record of a claim pending for hook on node
-- until expires (µs, an integer below 10^16: year 2286).
local function encode_pending(hook, node, expires)
  return 'q' .. string.format('%03d', #hook) .. hook .. string.format('%016d', expires) .. node
end

-- decode_claim returns the state ('p' pending or 'c' committed), the
-- hook_id and, for a pending claim that has it, the expiry (µs) of a
-- record, and raises a script error (an error reply, never a wrong
-- decision) when the value was not written by encode_claim or
-- encode_pending.
local function decode_claim(v)
  -- The first byte is the state.
  local st = string.sub(v, 1, 1)
  -- The next three bytes are the hook_id's length: exactly three digits,
  -- 1–256 (tonumber alone would take " 5", "0x5" or "1e1").
  local digits = string.sub(v, 2, 4)
  local n = string.match(digits, '^%d%d%d$') and tonumber(digits)
  -- Anything else is some other program's key under our prefix: refuse.
  if (st ~= 'p' and st ~= 'q' and st ~= 'c') or not n or n < 1 or n > 256 or #v < 4 + n then
    error('fleetstore: malformed claim record')
  end
  -- The hook_id follows the length.
  local hook = string.sub(v, 5, 4 + n)
  if st ~= 'q' then
    return st, hook
  end
  -- Then the pending expiry: exactly 16 digits.
  local exp = string.sub(v, 5 + n, 20 + n)
  if not string.match(exp, '^%d%d%d%d%d%d%d%d%d%d%d%d%d%d%d%d$') then
    error('fleetstore: malformed claim record')
  end
  return 'p', hook, tonumber(exp)
end
