--[[
  Token bucket, one bucket: the single-key form of token-bucket-n.lua, with the same semantics, state
  and reply, and no loop or table but the reply (RateLimiter runs it for a call with one bucket; its
  Redis CPU per call is what the benchmark in bench/limiter measures).
  Refill continuously at `rate` tokens/s up to `capacity`, then take `cost` if the bucket has it.
  A denied call writes nothing.

  KEYS[1]   the bucket: 25 bytes, struct '<Bddd': format 2, microtokens (1e-6 token) at ts (µs since
            epoch), and the key's expiry (µs, on the same clock), all doubles exactly. Format 1 (the
            same with whole tokens, written by 0.1.0 before this change) is read as tokens * 1e6 so a
            rolling upgrade keeps its buckets. One GET and one SET: PX when the expiry must move (it is
            kept between resetAfterMs + margin/2 and resetAfterMs + margin from now), else KEEPTTL.
            Microtokens because rate (tokens/s) is also microtokens per µs: with integer (or dyadic,
            e.g. 0.5) rates, capacities and costs every quantity is an integer (exact in doubles), so
            remaining, retryAfterMs and resetAfterMs are exact (tokens summed from refills of 0.1 once
            made 1.9999999999999998 and reported 1 left where 2 were).

  ARGV[1]   now           µs since epoch, or "" to read Redis TIME (only tests inject a clock)
  ARGV[2]   ttl margin    ms added to the time to refill fully, for the key's PX (the TTL stays between
                          the time to refill fully + margin/2 and + margin)
  ARGV[3]   capacity      tokens (burst), > 0
  ARGV[4]   rate          tokens per second, > 0
  ARGV[5]   cost          tokens to take, >= 0, <= capacity (0 = peek: nothing is written)

  Returns 6 integers, as token-bucket-n.lua with one key:
    { code, index, allowed (1|0), remaining (whole tokens, floor), retryAfterMs (ceil, 0 when allowed),
      resetAfterMs (ms until full, ceil) }
    code   1 allowed, 0 denied, -1 cost > capacity, -2 invalid argument (see LuaCode in scripts.ts)
    index  1 when denied or on an argument error about the bucket; 0 when allowed
]]
local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  now = tonumber(ARGV[1])
end
local marginMs = tonumber(ARGV[2])
if now == nil or marginMs == nil then return { -2, 0, 0, 0, 0, 0 } end
local capacity = tonumber(ARGV[3])
local rate = tonumber(ARGV[4])
local cost = tonumber(ARGV[5])
if capacity == nil or rate == nil or cost == nil or capacity <= 0 or rate <= 0 or cost < 0 then
  return { -2, 1, 0, 0, 0, 0 }
end
if cost > capacity then return { -1, 1, 0, 0, 0, 0 } end

local tokens, ts, expAt, format -- tokens in microtokens
local stored = redis.call('GET', KEYS[1])
if stored and #stored == 25 then
  format, tokens, ts, expAt = struct.unpack('<Bddd', stored)
  if format == 1 then
    tokens = tokens * 1000000
  elseif format ~= 2 then
    tokens = nil
  end
end
local full = capacity * 1000000
if tokens == nil then
  tokens = full
  ts = now
end
-- A clock that steps back (an injected one, or a failed-over replica) never removes tokens.
if now > ts then
  tokens = math.min(full, tokens + (now - ts) * rate)
  ts = now
end

local need = cost * 1000000
local perMs = rate * 1000 -- microtokens per ms
if tokens < need then
  return { 0, 1, 0, math.floor(tokens / 1000000), math.ceil((need - tokens) / perMs),
    math.ceil((full - tokens) / perMs) }
end
if cost > 0 then
  tokens = tokens - need
  local resetMs = math.ceil((full - tokens) / perMs)
  -- The key must outlive the refill. Its expiry stays while at least resetMs + margin/2 away (KEEPTTL
  -- leaves Redis's expires table alone: ~0.7 µs less per call), else it is set to resetMs + margin.
  if expAt ~= nil and expAt >= now + (resetMs + marginMs / 2) * 1000 then
    redis.call('SET', KEYS[1], struct.pack('<Bddd', 2, tokens, ts, expAt), 'KEEPTTL')
  else
    redis.call('SET', KEYS[1], struct.pack('<Bddd', 2, tokens, ts, now + (resetMs + marginMs) * 1000),
      'PX', resetMs + marginMs)
  end
  return { 1, 0, 1, math.floor(tokens / 1000000), 0, resetMs }
end
return { 1, 0, 1, math.floor(tokens / 1000000), 0, math.ceil((full - tokens) / perMs) }
