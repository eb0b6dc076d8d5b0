-- claim.lua: the claim record codec, prepended to hit.lua and settle.lua
-- (a Redis script cannot call another script, so the Go side concatenates
-- the sources before loading them).
--
-- A claim key holds one string: its state byte ('p' pending, 'c'
-- committed), the hook_id's length as three decimal digits (hook_id is
-- 1–256 bytes), the hook_id itself, then the node (0–256 bytes, the rest of
-- the string). Any byte may appear in hook_id or node: the length prefix,
-- not a separator, says where hook_id ends.

-- encode_claim builds the record of a claim in state st held by hook on node.
local function encode_claim(st, hook, node)
  -- string.format pads the length to exactly three digits ("007").
  return st .. string.format('%03d', #hook) .. hook .. node
end

-- decode_claim returns the state byte and the hook_id of a record, and
-- raises a script error (an error reply, never a wrong decision) when the
-- value was not written by encode_claim.
local function decode_claim(v)
  -- The first byte is the state.
  local st = string.sub(v, 1, 1)
  -- The next three bytes are the hook_id's length: exactly three digits,
  -- 1–256 (tonumber alone would take " 5", "0x5" or "1e1").
  local digits = string.sub(v, 2, 4)
  local n = string.match(digits, '^%d%d%d$') and tonumber(digits)
  -- Anything else is some other program's key under our prefix: refuse.
  if (st ~= 'p' and st ~= 'c') or not n or n < 1 or n > 256 or #v < 4 + n then
    error('fleetstore: malformed claim record')
  end
  -- The hook_id follows the length; the node (unused here) follows it.
  return st, string.sub(v, 5, 4 + n)
end
