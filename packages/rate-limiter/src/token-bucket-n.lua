--[[
  Token bucket over N policies, all or nothing: refill every bucket continuously at its rate up to
  its capacity, then take each policy's cost from every bucket only if every bucket has it.
  A denied call writes nothing, so it consumes from none.

  `-n`: the number of keys varies per call (one per bucket: a policy may have several ids); it is
  passed as EVAL's numkeys. The caller merges an id given twice (one key appears once).
  Every key of one call must share one hash tag (Redis Cluster: one slot).

  KEYS[i]   bucket i: 25 bytes, struct '<Bddd': format 2, microtokens at ts (µs since epoch), and the
            key's expiry (µs, same clock), all doubles exactly (format 1, whole tokens, is read as
            tokens * 1e6; see token-bucket-1.lua for why microtokens). One GET and one SET per key: PX when the expiry must move (it is kept between
            resetAfterMs + margin/2 and resetAfterMs + margin from now), else KEEPTTL.
            token-bucket-1.lua is the same for one key, without the loops.

  ARGV[1]   now           µs since epoch, or "" to read Redis TIME (only tests inject a clock)
  ARGV[2]   ttl margin    ms added to the time to refill fully, for each key's PEXPIRE
  then per key i (a bucket of one policy), at ARGV[3 * i], ARGV[3 * i + 1], ARGV[3 * i + 2]:
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

  local tokens, ts, expAt, format -- tokens in microtokens
  local stored = redis.call('GET', KEYS[i])
  if stored and #stored == 25 then
    format, tokens, ts, expAt = struct.unpack('<Bddd', stored)
    if format == 1 then
      tokens = tokens * 1000000
    elseif format ~= 2 then
      tokens = nil
    end
  end
  if tokens == nil then
    tokens = capacity * 1000000
    ts = now
  end
  -- A clock that steps back (an injected one, or a failed-over replica) never removes tokens.
  if now > ts then
    tokens = math.min(capacity * 1000000, tokens + (now - ts) * rate)
    ts = now
  end
  state[3 * i - 2] = tokens
  state[3 * i - 1] = ts
  state[3 * i] = expAt or false

  local retryAfterMs = 0
  if tokens < cost * 1000000 then
    allAllowed = false
    retryAfterMs = math.ceil((cost * 1000000 - tokens) / (rate * 1000))
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
  local tokens = state[3 * i - 2]
  local resetMs
  if allAllowed and cost > 0 then
    tokens = tokens - cost * 1000000
    resetMs = math.ceil((capacity * 1000000 - tokens) / (rate * 1000))
    -- As in token-bucket-1.lua: keep the expiry while it is at least resetMs + margin/2 away.
    local expAt = state[3 * i]
    if expAt and expAt >= now + (resetMs + marginMs / 2) * 1000 then
      redis.call('SET', KEYS[i], struct.pack('<Bddd', 2, tokens, state[3 * i - 1], expAt), 'KEEPTTL')
    else
      redis.call('SET', KEYS[i], struct.pack('<Bddd', 2, tokens, state[3 * i - 1], now + (resetMs + marginMs) * 1000),
        'PX', resetMs + marginMs)
    end
  else
    resetMs = math.ceil((capacity * 1000000 - tokens) / (rate * 1000))
  end
  reply[4 * i] = math.floor(tokens / 1000000)
  reply[4 * i + 2] = resetMs
end
return reply
