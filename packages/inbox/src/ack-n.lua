--[[
  Records that notifications of one user reached a screen: `deliveredAt` and `deliveredBy` are written
  once (the first ack wins; later acks change nothing). Only notifications in the inbox count.

  `-n`: two keys per acked notification; all share the user's hash tag (Redis Cluster: one slot).

  KEYS[2i-1]  marker hash of notification i (see append-n.lua)
  KEYS[2i]    where its marker is when KEYS[2i-1] has none: for a routed id, the marker under the
              user's keys that a worker from before routed ids wrote; else KEYS[2i-1] again

  ARGV[1]  now        ms since epoch, or "" to read Redis TIME
  ARGV[2]  instance   who recorded it (realtime instance id, or "api")
  ARGV[3]  user       the acking user: a routed marker (keys.ts) of another user of the slot is not theirs

  Returns, always 3 elements: { recorded, now, indices }
    recorded  how many notifications got their first `deliveredAt` in this call
    now       the `deliveredAt` written, ms since epoch
    indices   the 1-based indices i of those notifications (for their delivery webhooks)
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
for i = 1, #KEYS / 2 do
  local key = KEYS[2 * i - 1]
  local marker = redis.call('HMGET', key, 'state', 'user')
  if not marker[1] and KEYS[2 * i] ~= key then
    key = KEYS[2 * i]
    marker = redis.call('HMGET', key, 'state', 'user')
  end
  if marker[1] == 'inbox' and (not marker[2] or marker[2] == ARGV[3])
    and redis.call('HSETNX', key, 'deliveredAt', now) == 1 then
    redis.call('HSET', key, 'deliveredBy', ARGV[2])
    recorded = recorded + 1
    indices[recorded] = i
  end
end
return { recorded, now, indices }
