-- gcra-load.lua: reads a GCRA bucket (gcra-1.lua's KEYS[1] format) and what taking `cost` from
-- it means. Needs `capacity`, `rate`, `cost` and `now`; defines `interval` (µs per unit of cost, whole:
-- see gcra-n.lua's header), `tolerance` (µs: how far the TAT may run ahead of now), `tat` (the stored TAT,
-- never before now), `expAt` (the key's expiry in µs, nil when never written), `newTat` (the TAT after
-- taking the cost) and `allowAt` (when that is allowed: now or earlier means allowed).
--   $key      the bucket's key
local interval = math.max(1, math.floor(1000000 / rate + 0.5))
local tolerance = capacity * interval
local tat, expAt, _
local stored = redis.call('GET', $key)
if stored then
  if #stored == 17 and string.byte(stored) == 1 then
    _, tat, expAt = struct.unpack('<Bdd', stored)
  end
end
if tat == nil or tat < now then tat = now end
local newTat = tat + cost * interval
local allowAt = newTat - tolerance
