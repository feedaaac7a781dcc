--[[
  Fixed window counter over N policies, all or nothing: at most `capacity` per window of
  capacity / rate seconds, the window aligned to the epoch. Kept for comparison with the token
  bucket: across a window edge it admits up to 2 x capacity in a moment.
  A denied call writes nothing, so it consumes from none.

  `-n`: the number of keys varies per call (one per policy); it is passed as EVAL's numkeys.
  Every key of one call must share one hash tag (Redis Cluster: one slot).

  KEYS[i]   counter of policy i: a hash { w = <window index>, c = <count in window w> }

  ARGV[1]   now           µs since epoch, or "" to read Redis TIME (only tests inject a clock)
  ARGV[2]   ttl margin    ms added to the end of the window, for each key's PEXPIRE
  then per key i (a bucket of one policy), at ARGV[3 * i], ARGV[3 * i + 1], ARGV[3 * i + 2]:
            capacity      limit per window, > 0
            rate          capacity / window length in seconds, > 0
            cost          >= 0, <= capacity (0 = peek: nothing is written)

  Returns, always 2 + 4 * N integers:
    { code, index,
      per policy: allowed (1|0), remaining (floor), retryAfterMs (ceil, 0 when this policy alone
      would allow), resetAfterMs (ms until the window ends, 0 when nothing is counted; ceil) }
    code   1 allowed, 0 denied, -1 cost > capacity, -2 invalid argument (see LuaCode in scripts.ts)
    index  the denying policy (the one that needs the longest wait), or the policy of the error;
           0 when allowed
]]
local n = #KEYS

local function fail(code, index)
  local reply = { code, index }
  for i = 1, 4 * n do reply[2 + i] = 0 end
  return reply
end

local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  now = tonumber(ARGV[1])
end
local marginMs = tonumber(ARGV[2])
if now == nil or marginMs == nil then return fail(-2, 0) end

local capacities, costs, counts, windows, ends = {}, {}, {}, {}, {}
local allAllowed = true
local denyIndex, longestWait = 0, -1
local reply = { 1, 0 }

for i = 1, n do
  local capacity = tonumber(ARGV[3 * i])
  local rate = tonumber(ARGV[3 * i + 1])
  local cost = tonumber(ARGV[3 * i + 2])
  if capacity == nil or rate == nil or cost == nil or capacity <= 0 or rate <= 0 or cost < 0 then
    return fail(-2, i)
  end
  if cost > capacity then return fail(-1, i) end

  local length = capacity / rate * 1000000  -- µs
  local window = math.floor(now / length)
  local state = redis.call('HMGET', KEYS[i], 'w', 'c')
  local count = 0
  if tonumber(state[1]) == window then count = tonumber(state[2]) or 0 end
  local windowEnd = (window + 1) * length
  capacities[i], costs[i], counts[i], windows[i], ends[i] = capacity, cost, count, window, windowEnd

  local retryAfterMs = 0
  if count + cost > capacity then
    allAllowed = false
    retryAfterMs = math.max(1, math.ceil((windowEnd - now) / 1000))
    if retryAfterMs > longestWait then
      longestWait = retryAfterMs
      denyIndex = i
    end
  end
  reply[4 * i - 1] = (count + cost <= capacity) and 1 or 0
  reply[4 * i + 1] = retryAfterMs
end

if not allAllowed then
  reply[1] = 0
  reply[2] = denyIndex
end

for i = 1, n do
  local count = counts[i]
  local untilEndMs = math.ceil((ends[i] - now) / 1000)
  if allAllowed and costs[i] > 0 then
    count = count + costs[i]
    redis.call('HSET', KEYS[i], 'w', string.format('%.17g', windows[i]), 'c', string.format('%.17g', count))
    redis.call('PEXPIRE', KEYS[i], untilEndMs + marginMs)
  end
  reply[4 * i] = math.floor(capacities[i] - count)
  reply[4 * i + 2] = (count > 0) and untilEndMs or 0
end
return reply
