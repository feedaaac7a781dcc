--[[
  GCRA refund: gives back what a call took when its caller never used the answer (see
  token-bucket-refund.lua): each bucket's TAT moves back by its cost, never before now (a TAT at or
  before now is a full bucket: nothing to give back). The expiry is kept.

  KEYS, ARGV   as gcra-n.lua (ARGV[2], the TTL margin, is not used)
  Returns      the number of buckets written
]]
--#include clock.lua
if now == nil then return redis.error_reply('ERR gcra-refund.lua: now is not a number') end
local written = 0
for i = 1, #KEYS do
  local rate = tonumber(ARGV[3 * i + 1])
  local cost = tonumber(ARGV[3 * i + 2])
  local stored = redis.call('GET', KEYS[i])
  if rate and rate > 0 and cost and cost > 0 and stored and #stored == 17 and string.byte(stored) == 1 then
    local _, tat, expAt = struct.unpack('<Bdd', stored)
    if tat > now then
      local interval = math.max(1, math.floor(1000000 / rate + 0.5))
      tat = math.max(now, tat - cost * interval)
      redis.call('SET', KEYS[i], struct.pack('<Bdd', 1, tat, expAt), 'KEEPTTL')
      written = written + 1
    end
  end
end
return written
