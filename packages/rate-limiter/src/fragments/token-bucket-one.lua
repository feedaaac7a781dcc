-- token-bucket-one.lua: a token-bucket call of one bucket, in one pass (token-bucket-1.lua, and a call of
-- one bucket in token-bucket-m.lua): reads and refills the bucket (token-bucket-load.lua), takes the cost
-- if it is there (a denied call writes nothing) and answers the call's 6 reply values. Needs `capacity`,
-- `rate`, `cost` (policy-args.lua), `now` and `marginMs`.
--   $key      the bucket's key
--   $reply, $replyEnd   what stands before and after the 6 reply values: `return {` and `}` in
--             token-bucket-1.lua, an assignment to the call's 6 reply slots (and nothing) in token-bucket-m.lua
--#include token-bucket-load.lua
--#   key = $key
local need = cost * 1000000
local perMs = rate * 1000 -- microtokens per ms
if tokens < need then
  $reply 0, 1, 0, math.floor(tokens / 1000000), math.ceil((need - tokens) / perMs),
    math.ceil((full - tokens) / perMs) $replyEnd
elseif cost > 0 then
  tokens = tokens - need
  local resetMs = math.ceil((full - tokens) / perMs)
  --#include expiry-set.lua
  --#   key = $key
  --#   state = '<Bddd', 2, tokens, ts
  --#   expAt = expAt
  $reply 1, 0, 1, math.floor(tokens / 1000000), 0, resetMs $replyEnd
else
  $reply 1, 0, 1, math.floor(tokens / 1000000), 0, math.ceil((full - tokens) / perMs) $replyEnd
end
