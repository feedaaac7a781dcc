--[[
  Marks notifications of one user read, and answers the exact unread count.

  KEYS[1]  stream   the user's inbox (see append-5.lua)
  KEYS[2]  meta     hash: `uv` = unread version (see append-n.lua)
  KEYS[3]  unread   set of unread notification ids

  ARGV[1]  mode     "ids": ARGV[2..] are notification ids (at most 1000);
                    "all": every notification;
                    "upto": ARGV[2] is an offset; the notifications at or before it
  ARGV[2..]         per mode

  Returns, always 5 elements: { changed, unreadCount, unreadVersion, ids, nowMs }
    changed  how many notifications went from unread to read (0: nothing changed, version unchanged)
    ids      those notifications' ids (for their delivery webhooks)
    nowMs    when, by Redis's clock (ms): the `at` of their `notification.read` webhooks, which then
             comes after the `deliveredAt` the ack script stamped by the same clock
]]
local mode = ARGV[1]
local changed = 0
local ids = {}
local function take(id)
  if redis.call('SREM', KEYS[3], id) == 1 then
    changed = changed + 1
    ids[changed] = id
  end
end
if mode == 'ids' then
  for a = 2, #ARGV do take(ARGV[a]) end
elseif mode == 'all' then
  -- The unread set holds only ids still in the stream: bounded by HERALD_INBOX_MAX_LENGTH.
  ids = redis.call('SMEMBERS', KEYS[3])
  changed = #ids
  redis.call('DEL', KEYS[3])
elseif mode == 'upto' then
  -- Bounded by the inbox length (HERALD_INBOX_MAX_LENGTH).
  local entries = redis.call('XRANGE', KEYS[1], '-', ARGV[2])
  for _, entry in ipairs(entries) do
    local fields = entry[2]
    for f = 1, #fields, 2 do
      if fields[f] == 'id' then take(fields[f + 1]) end
    end
  end
else
  return redis.error_reply('HERALD_ERR_INBOX_INVALID_ARGUMENT unknown read mode ' .. tostring(mode))
end
local time = redis.call('TIME')
local nowMs = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
-- A meta that is gone (expired with an idle inbox) starts its version where append-n.lua starts one: at
-- the time in ms × 1000, above every version the user's clients can have kept.
local version
if changed > 0 then
  version = redis.call('HINCRBY', KEYS[2], 'uv', 1)
  if version == 1 then
    version = nowMs * 1000 + 1
    redis.call('HSET', KEYS[2], 'uv', string.format('%d', version))
  end
else
  local uv = redis.call('HGET', KEYS[2], 'uv')
  version = uv and tonumber(uv) or nowMs * 1000
end
return { changed, redis.call('SCARD', KEYS[3]), version, ids, nowMs }
