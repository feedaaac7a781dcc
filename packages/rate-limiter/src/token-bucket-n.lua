--[[
  Token bucket over N policies, all or nothing: refill every bucket continuously at its rate up to
  its capacity, then take each policy's cost from every bucket only if every bucket has it.
  A denied call writes nothing, so it consumes from none.

  `-n`: the number of keys varies per call (one per policy); it is passed as EVAL's numkeys.
  Every key of one call must share one hash tag (Redis Cluster: one slot).

  KEYS[i]   bucket of policy i: a string "<tokens> <ts>": float tokens at ts, µs since epoch (both %.17g);
            one GET and one SET PX per key (cheaper than a hash plus PEXPIRE)

  ARGV[1]   now           µs since epoch, or "" to read Redis TIME (only tests inject a clock)
  ARGV[2]   ttl margin    ms added to the time to refill fully, for each key's PEXPIRE
  then per policy i, at ARGV[3 * i], ARGV[3 * i + 1], ARGV[3 * i + 2]:
            capacity      tokens (burst), > 0
            rate          tokens per second, > 0
            cost          tokens to take, >= 0, <= capacity (0 = peek: nothing is written)

  Returns, always 2 + 4 * N integers:
    { code, index,
      per policy: allowed (1|0), remaining (whole tokens, floor), retryAfterMs (ceil, 0 when this
      policy alone would allow), resetAfterMs (ms until full, ceil) }
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

-- One table for the whole call (tables cost more than arithmetic here): the reply, whose per-policy
-- slots also hold the refilled tokens and ts between the two passes.
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

  local tokens, ts
  local stored = redis.call('GET', KEYS[i])
  if stored then
    local space = string.find(stored, ' ', 1, true)
    if space then
      tokens = tonumber(string.sub(stored, 1, space - 1))
      ts = tonumber(string.sub(stored, space + 1))
    end
  end
  if tokens == nil or ts == nil then
    tokens = capacity
    ts = now
  end
  -- A clock that steps back (an injected one, or a failed-over replica) never removes tokens.
  if now > ts then
    tokens = math.min(capacity, tokens + (now - ts) * rate / 1000000)
    ts = now
  end
  state[2 * i - 1] = tokens
  state[2 * i] = ts

  local retryAfterMs = 0
  if tokens < cost then
    allAllowed = false
    retryAfterMs = math.ceil((cost - tokens) / rate * 1000)
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
  local capacity = tonumber(ARGV[3 * i])
  local rate = tonumber(ARGV[3 * i + 1])
  local cost = tonumber(ARGV[3 * i + 2])
  local tokens = state[2 * i - 1]
  if allAllowed and cost > 0 then
    tokens = tokens - cost
    -- %.17g keeps every bit of the double; Lua's default tostring keeps only 14 digits.
    redis.call('SET', KEYS[i], string.format('%.17g %.17g', tokens, state[2 * i]),
      'PX', math.ceil((capacity - tokens) / rate * 1000) + marginMs)
  end
  reply[4 * i] = math.floor(tokens)
  reply[4 * i + 2] = math.ceil((capacity - tokens) / rate * 1000)
end
return reply
