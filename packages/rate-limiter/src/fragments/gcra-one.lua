-- gcra-one.lua: a GCRA call of one bucket, in one pass (gcra-1.lua, and a call of one bucket in
-- gcra-m.lua): reads the bucket (gcra-load.lua), moves its TAT if the cost is allowed (a denied call writes
-- nothing) and answers the call's 6 reply values. Needs `capacity`, `rate`, `cost` (policy-args.lua),
-- `now` and `marginMs`.
--   $key      the bucket's key
--   $reply, $replyEnd   what stands before and after the 6 reply values: `return {` and `}` in gcra-1.lua,
--             an assignment to the call's 6 reply slots (and nothing) in gcra-m.lua
--#include gcra-load.lua
--#   key = $key
if allowAt > now then
  $reply 0, 1, 0, math.floor((tolerance - (tat - now)) / interval), math.ceil((allowAt - now) / 1000),
    math.ceil((tat - now) / 1000) $replyEnd
elseif newTat > tat then
  tat = newTat
  local resetMs = math.ceil((tat - now) / 1000)
  --#include expiry-set.lua
  --#   key = $key
  --#   state = '<Bdd', 1, tat
  --#   expAt = expAt
  $reply 1, 0, 1, math.floor((tolerance - (tat - now)) / interval), 0, resetMs $replyEnd
else
  $reply 1, 0, 1, math.floor((tolerance - (tat - now)) / interval), 0, math.ceil((tat - now) / 1000) $replyEnd
end
