--[[
  GCRA, M independent calls in one script call: what RateLimiter sends for the GCRA calls of one limiter
  made in the same tick (`batchCalls`), one bucket or several each. Each call is exactly gcra-n.lua's
  (all or nothing over its own buckets; gcra-1.lua's for one bucket), taken in order on one Redis TIME,
  so the batch decides as those calls would one after the other at one instant: a key may appear in
  several calls, and each call sees the previous ones' writes. One EVALSHA, one TIME and one reply for
  M calls instead of M of each. Same layout as token-bucket-m.lua.

  KEYS      the buckets of call 1, then those of call 2, … (within one call every key once: the caller
            merges an id given twice), in gcra-n.lua's state (struct '<Bdd')

  ARGV[1]   now           µs since epoch, or "" to read Redis TIME (only tests inject a clock)
  ARGV[2]   ttl margin    ms, as in gcra-n.lua
  then per call, in KEYS order:
            n             number of buckets of the call (>= 1): its next n keys in KEYS
            then per bucket i of the call, 3 values:
              capacity    burst, in requests of cost 1, > 0
              rate        requests of cost 1 per second, > 0
              cost        >= 0, <= capacity (0 = peek: nothing is written)

  Returns per call, in order, gcra-n.lua's reply for that call: 2 + 4 * n integers
    { code, index, per bucket: allowed (1|0), remaining (floor), retryAfterMs (ceil), resetAfterMs (ceil) }
    code   1 allowed, 0 denied, -1 cost > capacity, -2 invalid argument (see LuaCode in scripts.ts)
    index  the denying bucket of the call (longest wait) or the bucket of the error; 0 when allowed
  A malformed layout (n missing or < 1, or more keys than KEYS) is an error reply: only a caller bug
  makes one, and no call of the batch is decided.
]]
local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  now = tonumber(ARGV[1])
end
local marginMs = tonumber(ARGV[2])

-- Checked before any write, so a malformed batch changes nothing.
local nkeys, at = 0, 3
while at <= #ARGV do
  local n = tonumber(ARGV[at])
  if n == nil or n < 1 or n % 1 ~= 0 or nkeys + n > #KEYS or at + 3 * n > #ARGV then
    return redis.error_reply('ERR gcra-m.lua: malformed call layout at ARGV[' .. at .. ']')
  end
  nkeys = nkeys + n
  at = at + 1 + 3 * n
end
if nkeys ~= #KEYS then
  return redis.error_reply('ERR gcra-m.lua: ' .. nkeys .. ' keys in the layout, ' .. #KEYS .. ' given')
end

-- Writes a bucket's new TAT, keeping the expiry while it is at least resetMs + margin/2 away.
local function store(key, tat, expAt)
  local resetMs = math.ceil((tat - now) / 1000)
  if expAt and expAt >= now + (resetMs + marginMs / 2) * 1000 then
    redis.call('SET', key, struct.pack('<Bdd', 1, tat, expAt), 'KEEPTTL')
  else
    redis.call('SET', key, struct.pack('<Bdd', 1, tat, now + (resetMs + marginMs) * 1000), 'PX', resetMs + marginMs)
  end
end

-- A bucket's stored TAT (never before now) and expiry.
local function load(key)
  local tat, expAt, _
  local stored = redis.call('GET', key)
  if stored then
    if #stored == 17 and string.byte(stored) == 1 then
      _, tat, expAt = struct.unpack('<Bdd', stored)
    end
  end
  if tat == nil or tat < now then tat = now end
  return tat, expAt
end

-- Two tables for the whole batch: the reply, and the state of the current call's buckets.
local reply = {}
local state = {}
local k0, a, o = 0, 3, 0 -- keys before this call, ARGV index of this call's n, reply entries before it

while a <= #ARGV do
  local n = tonumber(ARGV[a])
  local failCode, failIndex
  if now == nil or marginMs == nil then failCode, failIndex = -2, 0 end
  local allAllowed = true
  local denyIndex, longestWait = 0, -1

  if failCode == nil and n == 1 then
    -- One bucket: gcra-1.lua's single pass, no state table.
    local capacity = tonumber(ARGV[a + 1])
    local rate = tonumber(ARGV[a + 2])
    local cost = tonumber(ARGV[a + 3])
    reply[o + 3], reply[o + 4], reply[o + 5], reply[o + 6] = 0, 0, 0, 0
    if capacity == nil or rate == nil or cost == nil or capacity <= 0 or rate <= 0 or cost < 0 then
      reply[o + 1], reply[o + 2] = -2, 1
    elseif cost > capacity then
      reply[o + 1], reply[o + 2] = -1, 1
    else
      local key = KEYS[k0 + 1]
      local interval = math.max(1, math.floor(1000000 / rate + 0.5))
      local tolerance = capacity * interval
      local tat, expAt = load(key)
      local newTat = tat + cost * interval
      local allowAt = newTat - tolerance
      if allowAt > now then
        reply[o + 1], reply[o + 2] = 0, 1
        reply[o + 5] = math.ceil((allowAt - now) / 1000)
      else
        if newTat > tat then
          tat = newTat
          store(key, tat, expAt)
        end
        reply[o + 1], reply[o + 2], reply[o + 3] = 1, 0, 1
      end
      reply[o + 4] = math.floor((tolerance - (tat - now)) / interval)
      reply[o + 6] = math.ceil((tat - now) / 1000)
    end
  else
    if failCode == nil then
      for i = 1, n do
        local capacity = tonumber(ARGV[a + 3 * i - 2])
        local rate = tonumber(ARGV[a + 3 * i - 1])
        local cost = tonumber(ARGV[a + 3 * i])
        if capacity == nil or rate == nil or cost == nil or capacity <= 0 or rate <= 0 or cost < 0 then
          failCode, failIndex = -2, i
          break
        end
        if cost > capacity then
          failCode, failIndex = -1, i
          break
        end

        local interval = math.max(1, math.floor(1000000 / rate + 0.5))
        local tolerance = capacity * interval
        local tat, expAt = load(KEYS[k0 + i])
        local newTat = tat + cost * interval
        local allowAt = newTat - tolerance
        state[3 * i - 2] = tat
        state[3 * i - 1] = newTat
        state[3 * i] = expAt or false

        local retryAfterMs = 0
        if allowAt > now then
          allAllowed = false
          retryAfterMs = math.ceil((allowAt - now) / 1000)
          if retryAfterMs > longestWait then
            longestWait = retryAfterMs
            denyIndex = i
          end
          reply[o + 4 * i - 1] = 0
        else
          reply[o + 4 * i - 1] = 1
        end
        reply[o + 4 * i + 1] = retryAfterMs
      end
    end

    if failCode ~= nil then
      reply[o + 1], reply[o + 2] = failCode, failIndex
      for j = 1, 4 * n do reply[o + 2 + j] = 0 end
    else
      reply[o + 1], reply[o + 2] = 1, 0
      if not allAllowed then reply[o + 1], reply[o + 2] = 0, denyIndex end
      for i = 1, n do
        local interval = math.max(1, math.floor(1000000 / tonumber(ARGV[a + 3 * i - 1]) + 0.5))
        local tolerance = tonumber(ARGV[a + 3 * i - 2]) * interval
        local tat = state[3 * i - 2]
        if allAllowed and state[3 * i - 1] > tat then
          tat = state[3 * i - 1]
          store(KEYS[k0 + i], tat, state[3 * i])
        end
        reply[o + 4 * i] = math.floor((tolerance - (tat - now)) / interval)
        reply[o + 4 * i + 2] = math.ceil((tat - now) / 1000)
      end
    end
  end

  k0 = k0 + n
  a = a + 1 + 3 * n
  o = o + 2 + 4 * n
end
return reply
