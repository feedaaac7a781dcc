-- buckets-m.lua: the whole of token-bucket-m.lua and gcra-m.lua: M independent calls, in order, on one
-- clock; a call of one bucket as the -1 script ($one), a call of several as the -n script
-- (all-or-nothing.lua).
--   $script   the script's file name, for its error replies
--   $one      the algorithm's one-bucket fragment (token-bucket-one.lua, gcra-one.lua)
--   $decide   the algorithm's first-pass fragment
--   $take     the algorithm's second-pass fragment
--#include clock.lua

-- The calls of a batch repeat their policies' numbers (capacity, rate, cost, n): each text is parsed
-- once. Lua's tonumber of a string runs strtod twice (~900 instructions): 14 per two-bucket call were
-- ~15 % of the script.
local parse, parsed = tonumber, {}
local function tonumber(text)
  local value = parsed[text]
  if value == nil then
    value = parse(text)
    if value ~= nil then parsed[text] = value end
  end
  return value
end

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

-- A bucket that several calls of the batch share (the gateway's sender bucket is in every call of its
-- batch) is read once and written once: the fragments' GET and SET of buckets go through `buckets` (the
-- latest value of each bucket read or written) and `ttls` (per bucket written: the PX of its latest SET
-- that moved the expiry, or true when every SET kept it), and the batch's writes go to Redis at the end,
-- one SET per bucket, in the order they were first written. A call sees the calls before it as it would
-- if they had been written at once; a script error (a bucket key of another type) writes nothing.
-- Every bucket is one GET and one SET whatever the number of calls it appears in (~2 commands less per
-- call for the gateway's sender).
local server = redis
local buckets, ttls, written = {}, {}, {}
local redis = {
  call = function(command, key, value, mode, px)
    if command == 'GET' then
      local stored = buckets[key]
      if stored == nil then
        stored = server.call('GET', key)
        buckets[key] = stored
      end
      return stored
    end
    -- SET key value KEEPTTL | SET key value PX ms (expiry-set.lua)
    buckets[key] = value
    if ttls[key] == nil then written[#written + 1] = key end
    if mode == 'PX' then ttls[key] = px elseif ttls[key] == nil then ttls[key] = true end
  end,
}

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
for w = 1, #written do
  local key = written[w]
  local ttl = ttls[key]
  if ttl == true then
    server.call('SET', key, buckets[key], 'KEEPTTL')
  else
    server.call('SET', key, buckets[key], 'PX', ttl)
  end
end
return reply
