--[[
  Holds one webhook message of a parked endpoint, atomically with the check that it is parked, so that a
  `resume` (which drains the list in one MULTI) never misses a message held at the same moment.

  Both keys share the tenant's hash tag (Redis Cluster: one slot).

  KEYS[1]  config   hash of the tenant's webhook (`state` = active | parked)
  KEYS[2]  held     list of held messages (JSON webhook jobs), oldest first

  ARGV[1]  job      the message as JSON
  ARGV[2]  max      most messages held; the oldest are dropped beyond it, >= 1

  Returns, always 1 integer: 1 held, 0 not parked (deliver it), -1 no webhook (drop it)
]]
local state = redis.call('HGET', KEYS[1], 'state')
if not state then return -1 end
if state ~= 'parked' then return 0 end
redis.call('RPUSH', KEYS[2], ARGV[1])
redis.call('LTRIM', KEYS[2], -tonumber(ARGV[2]), -1)
return 1
