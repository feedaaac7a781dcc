--[[
  GCRA (generic cell rate algorithm) over N policies, all or nothing. One number per key: the
  theoretical arrival time (TAT). Exactly a token bucket of the same capacity refilled one unit per
  `interval` = round(1e6 / rate) whole µs (3/s: 333,333 µs, i.e. 3.000003/s): a bucket holding `tokens`
  is a TAT of now + (capacity - tokens) * interval. Whole µs keep every quantity an integer (exact in
  doubles for integer capacities and costs), so `remaining` = floor(tokens) is exact: with
  interval = 1e6 / 3 a fresh bucket of capacity 7 reported 7 * interval / interval = 6.999999999999999.
  A denied call writes nothing, so it consumes from none.

  `-n`: the number of keys varies per call (one per bucket: a policy may have several ids); it is
  passed as EVAL's numkeys. The caller merges an id given twice (one key appears once).
  Every key of one call must share one hash tag (Redis Cluster: one slot).

  KEYS[i]   bucket i: 17 bytes, struct '<Bdd': format 1, the TAT and the key's expiry (doubles, µs since
            epoch, exactly). SET PX when the expiry must
            move (kept between resetAfterMs + margin/2 and + margin from now), else KEEPTTL.
            gcra-1.lua is the same for one key.

  ARGV[1]   now           µs since epoch, or "" to read Redis TIME (only tests inject a clock)
  ARGV[2]   ttl margin    ms added to the time until the TAT, for each key's PX
  then per key i (a bucket of one policy), at ARGV[3 * i], ARGV[3 * i + 1], ARGV[3 * i + 2]:
            capacity      burst, in requests of cost 1, > 0
            rate          requests of cost 1 per second, > 0
            cost          >= 0, <= capacity (0 = peek: nothing is written)

  Returns, always 2 + 4 * N integers:
    { code, index,
      per policy: allowed (1|0), remaining (floor), retryAfterMs (ceil, 0 when this policy alone
      would allow), resetAfterMs (ms until the TAT, i.e. until full, ceil) }
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

-- One table besides the reply (tables cost more than arithmetic here): TAT and new TAT per policy.
local reply = { 1, 0 }
local state = {}
local allAllowed = true
local denyIndex, longestWait = 0, -1

for i = 1, n do
  local capacity = tonumber(ARGV[3 * i])
  local rate = tonumber(ARGV[3 * i + 1])
  local cost = tonumber(ARGV[3 * i + 2])
  if capacity == nil or rate == nil or cost == nil or capacity <= 0 or rate <= 0 or cost < 0 then
    return fail(-2, i)
  end
  if cost > capacity then return fail(-1, i) end

  -- µs per unit of cost, whole (see the header): every quantity below is an integer, exact in doubles
  local interval = math.max(1, math.floor(1000000 / rate + 0.5))
  local tolerance = capacity * interval    -- µs: how far the TAT may run ahead of now
  local tat, expAt, _
  local stored = redis.call('GET', KEYS[i])
  if stored then
    if #stored == 17 and string.byte(stored) == 1 then
      _, tat, expAt = struct.unpack('<Bdd', stored)
    end
  end
  if tat == nil or tat < now then tat = now end
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
    reply[4 * i - 1] = 0
  else
    reply[4 * i - 1] = 1
  end
  reply[4 * i + 1] = retryAfterMs
end

if not allAllowed then
  reply[1] = 0
  reply[2] = denyIndex
end

for i = 1, n do
  local interval = math.max(1, math.floor(1000000 / tonumber(ARGV[3 * i + 1]) + 0.5))
  local tolerance = tonumber(ARGV[3 * i]) * interval
  local tat = state[3 * i - 2]
  if allAllowed and state[3 * i - 1] > tat then
    tat = state[3 * i - 1]
    local resetMs = math.ceil((tat - now) / 1000)
    -- As in token-bucket-1.lua: keep the expiry while it is at least resetMs + margin/2 away.
    local expAt = state[3 * i]
    if expAt and expAt >= now + (resetMs + marginMs / 2) * 1000 then
      redis.call('SET', KEYS[i], struct.pack('<Bdd', 1, tat, expAt), 'KEEPTTL')
    else
      redis.call('SET', KEYS[i], struct.pack('<Bdd', 1, tat, now + (resetMs + marginMs) * 1000),
        'PX', resetMs + marginMs)
    end
  end
  reply[4 * i] = math.floor((tolerance - (tat - now)) / interval)
  reply[4 * i + 2] = math.ceil((tat - now) / 1000)
end
return reply
