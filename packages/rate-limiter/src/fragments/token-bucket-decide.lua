-- token-bucket-decide.lua: the first pass of an all-or-nothing token-bucket call, for bucket i: reads and
-- refills it (token-bucket-load.lua), keeps its tokens, ts and expiry in `state` (at 3 * i - 2, 3 * i - 1,
-- 3 * i) for the second pass, and judges it (deny-track.lua). Needs `capacity`, `rate`, `cost`
-- (policy-args.lua) and what deny-track.lua needs.
--   $key      bucket i's key
--   $slot     reply index of bucket i's remaining
--#include token-bucket-load.lua
--#   key = $key
state[3 * i - 2] = tokens
state[3 * i - 1] = ts
state[3 * i] = expAt or false
--#include deny-track.lua
--#   denied = tokens < cost * 1000000
--#   wait = math.ceil((cost * 1000000 - tokens) / (rate * 1000))
--#   slot = $slot
