--[[
  Cancels a notification that the worker has not stored yet: its marker records `cancelled`, and the
  append of the same id (append-n.lua, a job that was already running, a retry) then stores nothing.
  Marker first, whoever comes second sees the other's: a notification is either stored or cancelled.

  KEYS[1]  marker   hash of this notification (see append-n.lua)
  KEYS[2]  legacy   for a routed id (keys.ts), its marker under the user's keys, where a worker or
                    gateway from before routed ids reads and writes it: read when KEYS[1] has none, and
                    written too, so that such a worker stores nothing either; else KEYS[1] again

  ARGV[1]  retentionMs   TTL of the marker, ms (the inbox's retention)
  ARGV[2]  tenantId      the cancelling tenant, kept in the marker ("" = none)
  ARGV[3]  user          the owner, kept in a routed marker, "" for any other
  ARGV[4]  createdAt     when the gateway accepted it (ISO 8601), kept for its status once its job is
                         gone; "" or absent when unknown

  Returns { state, at }: `cancelled` and when (ms, now or at the first cancel), or the state the
  notification already had (`inbox`, `expired`, `deduplicated`, `muted`) and when that was recorded.
]]
local previous = redis.call('HMGET', KEYS[1], 'state', 'at')
if not previous[1] and KEYS[2] ~= KEYS[1] then previous = redis.call('HMGET', KEYS[2], 'state', 'at') end
if previous[1] then return { previous[1], previous[2] or '' } end
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
for i = 1, (KEYS[2] ~= KEYS[1]) and 2 or 1 do
  redis.call('HSET', KEYS[i], 'state', 'cancelled', 'at', now)
  if ARGV[2] ~= '' then redis.call('HSET', KEYS[i], 'tenantId', ARGV[2]) end
  if i == 1 and (ARGV[3] or '') ~= '' then redis.call('HSET', KEYS[i], 'user', ARGV[3]) end
  if (ARGV[4] or '') ~= '' then redis.call('HSET', KEYS[i], 'createdAt', ARGV[4]) end
  redis.call('PEXPIRE', KEYS[i], tonumber(ARGV[1]))
end
return { 'cancelled', tostring(now) }
