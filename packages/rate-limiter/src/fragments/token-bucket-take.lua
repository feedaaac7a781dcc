-- token-bucket-take.lua: the second pass of an all-or-nothing token-bucket call, for bucket i:
-- when every bucket allowed, takes the cost and writes the bucket (expiry-set.lua); then fills
-- bucket i's remaining and resetAfterMs slots. Needs `i`, `state` (the first pass's tokens, ts and expiry
-- of bucket i at 3 * i - 2, 3 * i - 1 and 3 * i), `allAllowed`, `reply`, `now` and `marginMs`.
--   $at       ARGV index of bucket i's capacity (rate and cost follow)
--   $key      bucket i's key
--   $slot     reply index of bucket i's remaining (resetAfterMs is $slot + 2)
local capacity = tonumber(ARGV[$at])
local rate = tonumber(ARGV[1 + $at])
local cost = tonumber(ARGV[2 + $at])
local tokens = state[3 * i - 2]
local resetMs
if allAllowed and cost > 0 then
  tokens = tokens - cost * 1000000
  resetMs = math.ceil((capacity * 1000000 - tokens) / (rate * 1000))
  local expAt = state[3 * i]
  --#include expiry-set.lua
  --#   key = $key
  --#   state = '<Bddd', 2, tokens, state[3 * i - 1]
  --#   expAt = expAt
else
  resetMs = math.ceil((capacity * 1000000 - tokens) / (rate * 1000))
end
reply[$slot] = math.floor(tokens / 1000000)
reply[$slot + 2] = resetMs
