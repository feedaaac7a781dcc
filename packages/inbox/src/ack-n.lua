--[[
  Records that notifications of one user reached a screen: `deliveredAt` and `deliveredBy` are written
  once (the first ack wins; later acks change nothing). Only notifications in the inbox count.

  `-n`: one key per acked notification; all share the user's hash tag (Redis Cluster: one slot).

  KEYS[i]  marker hash of notification i (see append-n.lua)

  ARGV[1]  now        ms since epoch, or "" to read Redis TIME
  ARGV[2]  instance   who recorded it (realtime instance id, or "api")
  ARGV[3]  user       the acking user: a routed marker (keys.ts) of another user of the slot is not theirs

  Returns, always 3 elements: { recorded, now, indices }
    recorded  how many notifications got their first `deliveredAt` in this call
    now       the `deliveredAt` written, ms since epoch
    indices   the 1-based KEYS indices of those notifications (for their delivery webhooks)
]]
local now
if ARGV[1] == '' then
  local time = redis.call('TIME')
  now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
else
  now = tonumber(ARGV[1])
end
local recorded = 0
local indices = {}
for i, key in ipairs(KEYS) do
  local marker = redis.call('HMGET', key, 'state', 'user')
  if marker[1] == 'inbox' and (not marker[2] or marker[2] == ARGV[3])
    and redis.call('HSETNX', key, 'deliveredAt', now) == 1 then
    redis.call('HSET', key, 'deliveredBy', ARGV[2])
    recorded = recorded + 1
    indices[recorded] = i
  end
end
return { recorded, now, indices }
