-- gcra-take.lua: the second pass of an all-or-nothing GCRA call, for bucket i: when every
-- bucket allowed, moves its TAT and writes it (expiry-set.lua); then fills bucket i's remaining
-- and resetAfterMs slots. Needs `i`, `state` (the first pass's TAT, new TAT and expiry of bucket i at
-- 3 * i - 2, 3 * i - 1 and 3 * i), `allAllowed`, `reply`, `now` and `marginMs`.
--   $at       ARGV index of bucket i's capacity (rate follows)
--   $key      bucket i's key
--   $slot     reply index of bucket i's remaining (resetAfterMs is $slot + 2)
local interval = math.max(1, math.floor(1000000 / tonumber(ARGV[1 + $at]) + 0.5))
local tolerance = tonumber(ARGV[$at]) * interval
local tat = state[3 * i - 2]
if allAllowed and state[3 * i - 1] > tat then
  tat = state[3 * i - 1]
  local resetMs = math.ceil((tat - now) / 1000)
  local expAt = state[3 * i]
  --#include expiry-set.lua
  --#   key = $key
  --#   state = '<Bdd', 1, tat
  --#   expAt = expAt
end
reply[$slot] = math.floor((tolerance - (tat - now)) / interval)
reply[$slot + 2] = math.ceil((tat - now) / 1000)
