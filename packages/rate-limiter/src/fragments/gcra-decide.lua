-- gcra-decide.lua: the first pass of an all-or-nothing GCRA call, for bucket i: reads it (gcra-load.lua),
-- keeps its TAT, new TAT and expiry in `state` (at 3 * i - 2, 3 * i - 1, 3 * i) for the second pass, and
-- judges it (deny-track.lua). Needs `capacity`, `rate`, `cost` (policy-args.lua) and what deny-track.lua
-- needs.
--   $key      bucket i's key
--   $slot     reply index of bucket i's remaining
--#include gcra-load.lua
--#   key = $key
state[3 * i - 2] = tat
state[3 * i - 1] = newTat
state[3 * i] = expAt or false
--#include deny-track.lua
--#   denied = allowAt > now
--#   wait = math.ceil((allowAt - now) / 1000)
--#   slot = $slot
