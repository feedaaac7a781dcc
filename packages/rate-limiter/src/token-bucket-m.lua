--[[
  Token bucket, M independent one-bucket decisions in one script call: what RateLimiter sends when
  several one-bucket calls of one limiter are made in the same tick (`batchCalls`). Each decision is
  exactly token-bucket-1.lua's, taken in KEYS order on one Redis TIME, so the batch decides as those
  calls would one after the other at one instant (a key may appear several times: each decision sees
  the previous one's write). One EVALSHA, one TIME and one reply for M decisions instead of M of each.

  KEYS[i]   bucket of decision i, in token-bucket-1.lua's state (struct '<Bddd'; legacy text read)

  ARGV[1]   now           µs since epoch, or "" to read Redis TIME (only tests inject a clock)
  ARGV[2]   ttl margin    ms, as in token-bucket-1.lua
  then per decision i, at ARGV[3 * i], ARGV[3 * i + 1], ARGV[3 * i + 2]:
            capacity      tokens (burst), > 0
            rate          tokens per second, > 0
            cost          tokens to take, >= 0, <= capacity (0 = peek: nothing is written)

  Returns 4 * M integers, per decision i:
    code (1 allowed, 0 denied, -1 cost > capacity, -2 invalid argument), remaining (floor),
    retryAfterMs (ceil, 0 when allowed), resetAfterMs (ceil)
]]
local n = #KEYS
local reply = {}
local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  now = tonumber(ARGV[1])
end
local marginMs = tonumber(ARGV[2])

for i = 1, n do
  local o = 4 * i - 3
  local capacity = tonumber(ARGV[3 * i])
  local rate = tonumber(ARGV[3 * i + 1])
  local cost = tonumber(ARGV[3 * i + 2])
  reply[o + 1], reply[o + 2], reply[o + 3] = 0, 0, 0
  if now == nil or marginMs == nil or capacity == nil or rate == nil or cost == nil or capacity <= 0
    or rate <= 0 or cost < 0 then
    reply[o] = -2
  elseif cost > capacity then
    reply[o] = -1
  else
    local key = KEYS[i]
    local tokens, ts, expAt, _
    local stored = redis.call('GET', key)
    if stored then
      if #stored == 25 and string.byte(stored) == 1 then
        _, tokens, ts, expAt = struct.unpack('<Bddd', stored)
      else
        local space = string.find(stored, ' ', 1, true)
        if space then
          tokens = tonumber(string.sub(stored, 1, space - 1))
          ts = tonumber(string.sub(stored, space + 1))
        end
      end
    end
    if tokens == nil or ts == nil then
      tokens = capacity
      ts = now
    end
    if now > ts then
      tokens = math.min(capacity, tokens + (now - ts) * rate / 1000000)
      ts = now
    end
    if tokens < cost then
      reply[o] = 0
      reply[o + 1] = math.floor(tokens)
      reply[o + 2] = math.ceil((cost - tokens) / rate * 1000)
      reply[o + 3] = math.ceil((capacity - tokens) / rate * 1000)
    else
      local resetMs
      if cost > 0 then
        tokens = tokens - cost
        resetMs = math.ceil((capacity - tokens) / rate * 1000)
        -- As in token-bucket-1.lua: keep the expiry while it is at least resetMs + margin/2 away.
        if expAt ~= nil and expAt >= now + (resetMs + marginMs / 2) * 1000 then
          redis.call('SET', key, struct.pack('<Bddd', 1, tokens, ts, expAt), 'KEEPTTL')
        else
          redis.call('SET', key, struct.pack('<Bddd', 1, tokens, ts, now + (resetMs + marginMs) * 1000),
            'PX', resetMs + marginMs)
        end
      else
        resetMs = math.ceil((capacity - tokens) / rate * 1000)
      end
      reply[o] = 1
      reply[o + 1] = math.floor(tokens)
      reply[o + 3] = resetMs
    end
  end
end
return reply
