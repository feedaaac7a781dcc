-- buckets-m.lua: the whole of token-bucket-m.lua and gcra-m.lua: M independent calls, in order, on one
-- clock; a call of one bucket as the -1 script ($one), a call of several as the -n script
-- (all-or-nothing.lua).
--   $script   the script's file name, for its error replies
--   $one      the algorithm's one-bucket fragment (token-bucket-one.lua, gcra-one.lua)
--   $decide   the algorithm's first-pass fragment
--   $take     the algorithm's second-pass fragment
--#include clock.lua

-- Checked before any write, so a malformed batch changes nothing.
local nkeys, at = 0, 3
while at <= #ARGV do
  local n = tonumber(ARGV[at])
  if n == nil or n < 1 or n % 1 ~= 0 or nkeys + n > #KEYS or at + 3 * n > #ARGV then
    return redis.error_reply('ERR $script: malformed call layout at ARGV[' .. at .. ']')
  end
  nkeys = nkeys + n
  at = at + 1 + 3 * n
end
if nkeys ~= #KEYS then
  return redis.error_reply('ERR $script: ' .. nkeys .. ' keys in the layout, ' .. #KEYS .. ' given')
end

-- Two tables for the whole batch: the reply, and the first pass's state of the current call's buckets.
local reply = {}
local state = {}
local k0, a, o = 0, 3, 0 -- keys before this call, ARGV index of this call's n, reply entries before it

while a <= #ARGV do
  local n = tonumber(ARGV[a])
  local failCode, failIndex
  if now == nil or marginMs == nil then
    failCode, failIndex = -2, 0
  elseif n == 1 then
    -- One bucket: the -1 script's single pass, no state table (~1.5 µs less per call).
    --#include policy-args.lua
    --#   at = 1 + a
    --#   invalid = failCode, failIndex = -2, 1
    --#   exceeds = failCode, failIndex = -1, 1
    if failCode == nil then
      local key = KEYS[k0 + 1]
      --#include $one
      --#   key = key
      --#   reply = reply[o + 1], reply[o + 2], reply[o + 3], reply[o + 4], reply[o + 5], reply[o + 6] =
      --#   replyEnd =
    end
  else
    reply[o + 1], reply[o + 2] = 1, 0
    local allAllowed = true
    local denyIndex, longestWait = 0, -1
    --#include all-or-nothing.lua
    --#   base = a + 3 * i - 2
    --#   key = KEYS[k0 + i]
    --#   offset = o
    --#   slot = o + 4 * i
    --#   decide = $decide
    --#   take = $take
  end
  if failCode ~= nil then
    reply[o + 1], reply[o + 2] = failCode, failIndex
    for j = 1, 4 * n do reply[o + 2 + j] = 0 end
  end

  k0 = k0 + n
  a = a + 1 + 3 * n
  o = o + 2 + 4 * n
end
return reply
