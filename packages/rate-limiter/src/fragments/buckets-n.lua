-- buckets-n.lua: the whole of token-bucket-n.lua and gcra-n.lua, one call over N buckets, all or nothing
-- (all-or-nothing.lua), each bucket's arguments at ARGV[3 * i] and its reply at 4 * i.
--   $decide   the algorithm's first-pass fragment
--   $take     the algorithm's second-pass fragment
--#include prelude-n.lua

-- One table besides the reply (tables cost more than arithmetic here): 3 values per bucket between the
-- two passes.
local state = {}
local failCode, failIndex
--#include all-or-nothing.lua
--#   base = 3 * i
--#   key = KEYS[i]
--#   offset = 0
--#   slot = 4 * i
--#   decide = $decide
--#   take = $take
if failCode ~= nil then return fail(failCode, failIndex) end
return reply
