--[[
  GCRA, one key: the single-key form of gcra-n.lua, with the same semantics, state and reply, and no
  loop or table but the reply. One number per key: the theoretical arrival time (TAT).
  A denied call writes nothing.

  KEYS[1]   17 bytes, struct '<Bdd': format 1, the TAT and the key's expiry (doubles, µs since epoch,
            exactly). SET PX when the expiry must move (it is kept between resetAfterMs + margin/2 and
            resetAfterMs + margin from now), else KEEPTTL.

  ARGV[1]   now           µs since epoch, or "" to read Redis TIME (only tests inject a clock)
  ARGV[2]   ttl margin    ms added to the time until the TAT, for the key's PX
  ARGV[3]   capacity      burst, in requests of cost 1, > 0
  ARGV[4]   rate          requests of cost 1 per second, > 0
  ARGV[5]   cost          >= 0, <= capacity (0 = peek: nothing is written)

  Returns 6 integers, as gcra-n.lua with one key:
    { code, index, allowed (1|0), remaining (floor), retryAfterMs (ceil, 0 when allowed),
      resetAfterMs (ms until the TAT, i.e. until full, ceil) }
    code   1 allowed, 0 denied, -1 cost > capacity, -2 invalid argument (see LuaCode in scripts.ts)
    index  1 when denied or on an argument error about the key; 0 when allowed
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

-- µs per unit of cost, whole (see gcra-n.lua): every quantity below is an integer, exact in doubles
local interval = math.max(1, math.floor(1000000 / rate + 0.5))
local tolerance = capacity * interval    -- µs: how far the TAT may run ahead of now
local tat, expAt, _
local stored = redis.call('GET', KEYS[1])
if stored then
  if #stored == 17 and string.byte(stored) == 1 then
    _, tat, expAt = struct.unpack('<Bdd', stored)
  end
end
if tat == nil or tat < now then tat = now end
local newTat = tat + cost * interval
local allowAt = newTat - tolerance

if allowAt > now then
  return { 0, 1, 0, math.floor((tolerance - (tat - now)) / interval), math.ceil((allowAt - now) / 1000),
    math.ceil((tat - now) / 1000) }
end
if newTat > tat then
  tat = newTat
  local resetMs = math.ceil((tat - now) / 1000)
  -- As in token-bucket-1.lua: keep the expiry while it is at least resetMs + margin/2 away.
  if expAt ~= nil and expAt >= now + (resetMs + marginMs / 2) * 1000 then
    redis.call('SET', KEYS[1], struct.pack('<Bdd', 1, tat, expAt), 'KEEPTTL')
  else
    redis.call('SET', KEYS[1], struct.pack('<Bdd', 1, tat, now + (resetMs + marginMs) * 1000), 'PX', resetMs + marginMs)
  end
  return { 1, 0, 1, math.floor((tolerance - (tat - now)) / interval), 0, resetMs }
end
return { 1, 0, 1, math.floor((tolerance - (tat - now)) / interval), 0, math.ceil((tat - now) / 1000) }
