-- all-or-nothing.lua: one call over its `n` buckets, all or nothing, in two passes: the first reads and
-- judges every bucket ($decide) and stops at a bad argument (`failCode`, `failIndex`: the includer
-- answers it); the second, when every argument was good, takes the cost from every bucket if every bucket
-- allowed, and fills the reply ($take). Needs `n`, `now`, `marginMs`, `reply` (its code and index set to
-- 1, 0), `state` (a table for the first pass's 3 values per bucket), `allAllowed` = true, `denyIndex`,
-- `longestWait` and an unset `failCode`, `failIndex`.
--   $base     ARGV index of bucket i's capacity, in terms of i (rate and cost follow)
--   $key      bucket i's key
--   $offset   reply entries before this call's (its code is at $offset + 1)
--   $slot     reply index of bucket i's remaining: $offset + 4 * i, written out so a 0 offset costs nothing
--   $decide   the algorithm's first-pass fragment (token-bucket-decide.lua, gcra-decide.lua)
--   $take     the algorithm's second-pass fragment (token-bucket-take.lua, gcra-take.lua)
for i = 1, n do
  local b = $base
  --#include policy-args.lua
  --#   at = b
  --#   invalid = failCode, failIndex = -2, i break
  --#   exceeds = failCode, failIndex = -1, i break
  --#include $decide
  --#   key = $key
  --#   slot = $slot
end
if failCode == nil then
  if not allAllowed then reply[$offset + 1], reply[$offset + 2] = 0, denyIndex end
  for i = 1, n do
    local b = $base
    --#include $take
    --#   at = b
    --#   key = $key
    --#   slot = $slot
  end
end
