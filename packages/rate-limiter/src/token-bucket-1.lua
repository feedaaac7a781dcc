--[[
  Token bucket: refill continuously, then take `cost` tokens if they are all there.

  The clock is Redis's own (TIME), so every caller sees one time whatever its own clock says.

  KEYS[1]  bucket key, a hash { tokens = <float tokens>, ts = <µs since epoch of `tokens`> }

  ARGV[1]  capacity        tokens (burst), > 0
  ARGV[2]  rate            tokens per second, > 0
  ARGV[3]  cost            tokens to take, >= 0 (0 = peek)
  ARGV[4]  now             µs since epoch, or "" to read Redis TIME (only tests inject a clock)
  ARGV[5]  ttl margin      ms added to the time to refill fully, for the key's PEXPIRE

  Returns { allowed (1|0), remaining (whole tokens, floor), retryAfterMs (ceil, 0 when allowed),
            resetAfterMs (ms until full, ceil) }
]]
local key = KEYS[1]
local capacity = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local marginMs = tonumber(ARGV[5])

local now
if ARGV[4] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  now = tonumber(ARGV[4])
end

local state = redis.call('HMGET', key, 'tokens', 'ts')
local tokens = tonumber(state[1])
local ts = tonumber(state[2])
if tokens == nil or ts == nil then
  tokens = capacity
  ts = now
end
-- A clock that steps back (an injected one, or a failed-over replica) never removes tokens.
if now > ts then
  tokens = math.min(capacity, tokens + (now - ts) * rate / 1000000)
  ts = now
end

local allowed = 0
local retryAfterMs = 0
if tokens >= cost then
  allowed = 1
  if cost > 0 then
    tokens = tokens - cost
    -- %.17g keeps every bit of the double; Lua's default tostring keeps only 14 digits.
    redis.call('HSET', key, 'tokens', string.format('%.17g', tokens), 'ts', string.format('%.17g', ts))
    redis.call('PEXPIRE', key, math.ceil((capacity - tokens) / rate * 1000) + marginMs)
  end
else
  retryAfterMs = math.ceil((cost - tokens) / rate * 1000)
end

local resetAfterMs = math.ceil((capacity - tokens) / rate * 1000)
return { allowed, math.floor(tokens), retryAfterMs, resetAfterMs }
