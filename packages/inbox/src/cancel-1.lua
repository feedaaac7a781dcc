--[[
  Cancels a notification that the worker has not stored yet: its marker records `cancelled`, and the
  append of the same id (append-n.lua, a job that was already running, a retry) then stores nothing.
  Marker first, whoever comes second sees the other's: a notification is either stored or cancelled.

  KEYS[1]  marker   hash of this notification (see append-n.lua)

  ARGV[1]  retentionMs   TTL of the marker, ms (the inbox's retention)
  ARGV[2]  tenantId      the cancelling tenant, kept in the marker ("" = none)
  ARGV[3]  user          the owner, kept in a routed marker (keys.ts), "" for any other

  Returns { state, at }: `cancelled` and when (ms, now or at the first cancel), or the state the
  notification already had (`inbox`, `expired`, `deduplicated`) and when that was recorded.
]]
local previous = redis.call('HMGET', KEYS[1], 'state', 'at')
if previous[1] then return { previous[1], previous[2] or '' } end
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
redis.call('HSET', KEYS[1], 'state', 'cancelled', 'at', now)
if ARGV[2] ~= '' then redis.call('HSET', KEYS[1], 'tenantId', ARGV[2]) end
if (ARGV[3] or '') ~= '' then redis.call('HSET', KEYS[1], 'user', ARGV[3]) end
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[1]))
return { 'cancelled', tostring(now) }
