--[[
  Token bucket refund: gives back what a call took when its caller never used the answer (the call's
  reply came after the caller's timeout, and the request was refused by the failure mode instead, so
  nothing was accepted for those tokens). Each bucket gets its cost back, refilled to now first and
  capped at its capacity, as if the call had never run (refilling is linear and capped: taking then
  giving back the same cost leaves what not taking would have). A bucket that is gone (expired, reset)
  is full: nothing to give back.

  KEYS, ARGV   as token-bucket-n.lua (ARGV[2], the TTL margin, is not used: the expiry is kept)
  Returns      the number of buckets written
]]
--#include clock.lua
if now == nil then return redis.error_reply('ERR token-bucket-refund.lua: now is not a number') end
local written = 0
for i = 1, #KEYS do
  local capacity = tonumber(ARGV[3 * i])
  local rate = tonumber(ARGV[3 * i + 1])
  local cost = tonumber(ARGV[3 * i + 2])
  local stored = redis.call('GET', KEYS[i])
  if capacity and rate and cost and cost > 0 and stored and #stored == 25 then
    local format, tokens, ts, expAt = struct.unpack('<Bddd', stored)
    if format == 1 then tokens = tokens * 1000000 end
    if format == 1 or format == 2 then
      local full = capacity * 1000000
      if now > ts then
        tokens = math.min(full, tokens + (now - ts) * rate)
        ts = now
      end
      tokens = math.min(full, tokens + cost * 1000000)
      redis.call('SET', KEYS[i], struct.pack('<Bddd', 2, tokens, ts, expAt), 'KEEPTTL')
      written = written + 1
    end
  end
end
return written
