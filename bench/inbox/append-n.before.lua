-- A copy of packages/inbox/src/append-n.lua at 527fc01, before the meta cache: the "before" of
-- bench/inbox/append-cost.ts only (nothing else loads it).
--[[
  Appends notifications to their users' inboxes, idempotently, and trims each inbox exactly: K of them
  in one call (the worker gathers the appends of one event-loop turn, so that an envelope of many
  notifications costs one script call, not one each), in the order given.

  Offsets are stream ids `<ms>-<seq>`: `seq` is the top entry's seq + 1 (1, 2, 3, … per user, no holes,
  so that a reader can tell a gap from a quiet period) and `ms` never goes below the top entry's.
  Trimming removes entries from the head only, so a reader that sees seq n followed by seq m > n + 1
  knows that the entries in between were trimmed.

  Every key of one notification shares its user's hash tag; on Redis Cluster one call carries only
  notifications whose users share a slot (and no index key: the caller writes those beside the call).

  KEYS, 7 per notification i (k = 7 * (i - 1)):
  KEYS[k+1]  stream   the inbox: XADD entries with fields `id` (notification id) and `n` (JSON)
  KEYS[k+2]  meta     hash: `uv` = unread version, incremented on every change of the unread set
  KEYS[k+3]  unread   set of the ids of unread notifications still in the stream
  KEYS[k+4]  marker   hash of this notification: state (inbox|expired|deduplicated|cancelled|muted), offset,
                      at (ms), duplicateOf, mutedBy, deliveredAt (ms), deliveredBy; the idempotency marker
  KEYS[k+5]  dedupe   string: the id of the first notification with this dedupe key (unused when hasDedupe = 0)
  KEYS[k+6]  mutes    set of the user's mutes: `topic:<name>` and `type:<name>` (preferences.ts); no TTL
  KEYS[k+7]  index    string: notification id -> user id (`<prefix>id:{<id>}`), set when ARGV indexUser is
                      not ""; else any key of this notification (unused)

  ARGV[1]  count         K, >= 1
  ARGV[2]  now           ms since epoch, or "" to read Redis TIME (only tests inject a clock)
  then 11 per notification i (a = 2 + 11 * (i - 1)):
  ARGV[a+1]  id            notification id
  ARGV[a+2]  json          the notification as JSON, without its offset
  ARGV[a+3]  deadline      ms since epoch after which the notification has expired; 0 = never
  ARGV[a+4]  hasDedupe     1 when KEYS[k+5] is a real dedupe key, else 0
  ARGV[a+5]  maxLength     entries kept per inbox, >= 1
  ARGV[a+6]  maxAgeMs      entries older than this (by offset ms) are trimmed, ms, >= 1
  ARGV[a+7]  retentionMs   TTL of every key touched (inbox, markers, dedupe keys, index), ms, >= maxAgeMs
  ARGV[a+8]  tenantId      sender's tenant, kept in the marker ("" = none)
  ARGV[a+9]  topicMute     `topic:<the notification's topic>`, or "" when it has none
  ARGV[a+10] typeMute      `type:<the notification's type>`, or "" when it has none
  ARGV[a+11] indexUser     the user id to write at KEYS[k+7], or "" to write no index here

  Returns 5 elements per notification, in order: { code, offset, unreadCount, unreadVersion, detail, … }
    code  1 appended now, 2 appended before (offset of that append), 3 expired, 4 deduplicated,
          5 cancelled before it was stored (cancel-1.lua), 6 muted: the user muted its topic or type, so
          nothing is stored (see AppendCode in scripts.ts); offset is "" unless the notification is in
          the inbox; detail is the first notification's id for code 4, the mute (`topic:<name>` or
          `type:<name>`) for code 6, else "".
]]
local now
if ARGV[2] == '' then
  local time = redis.call('TIME')
  now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
else
  now = tonumber(ARGV[2])
end

-- One notification: K = its 7 keys, A = its 11 arguments (1-based tables).
local function append(K, A)
  local id = A[1]
  local retention = tonumber(A[7])
  -- HSET of the marker's fields, with the sender's tenant when there is one (one command, not two).
  local function mark(...)
    if A[8] ~= '' then
      redis.call('HSET', K[4], 'tenantId', A[8], ...)
    else
      redis.call('HSET', K[4], ...)
    end
  end

  local function unread()
    return redis.call('SCARD', K[3]), tonumber(redis.call('HGET', K[2], 'uv') or '0')
  end

  -- Records a state that stores nothing (expired, deduplicated, muted), with its detail field if any,
  -- and answers it.
  local function settle(code, state, field, detail)
    if field then
      mark('state', state, 'at', now, field, detail)
    else
      mark('state', state, 'at', now)
    end
    redis.call('PEXPIRE', K[4], retention)
    local count, version = unread()
    return { code, '', count, version, detail or '' }
  end

  -- Idempotency: a notification processed again (stalled job, retry) answers what the first pass did;
  -- one cancelled before this pass (cancel-1.lua) stays cancelled, and one muted stays muted (an unmute
  -- meanwhile does not store it on a retry).
  local previous = redis.call('HMGET', K[4], 'state', 'offset', 'duplicateOf', 'mutedBy')
  if previous[1] then
    local codes = { inbox = 2, expired = 3, deduplicated = 4, cancelled = 5, muted = 6 }
    local count, version = unread()
    return { codes[previous[1]] or 2, previous[2] or '', count, version, previous[3] or previous[4] or '' }
  end

  local deadline = tonumber(A[3])
  if deadline > 0 and now > deadline then return settle(3, 'expired') end

  -- Muted: not stored at all (stored but not pushed would reach the screen anyway: the next gapless offset
  -- makes a reader fill the gap, and the unread count would count it). Before the dedupe key: a muted
  -- notification does not hold its dedupe key against a later one.
  local mutedBy = nil
  if A[9] ~= '' and redis.call('SISMEMBER', K[6], A[9]) == 1 then
    mutedBy = A[9]
  elseif A[10] ~= '' and redis.call('SISMEMBER', K[6], A[10]) == 1 then
    mutedBy = A[10]
  end
  if mutedBy then return settle(6, 'muted', 'mutedBy', mutedBy) end

  if A[4] == '1' then
    local first = redis.call('GET', K[5])
    if first and first ~= id then return settle(4, 'deduplicated', 'duplicateOf', first) end
    redis.call('SET', K[5], id, 'PX', retention)
  end

  local ms, seq = now, 1
  local top = redis.call('XREVRANGE', K[1], '+', '-', 'COUNT', 1)[1]
  if top then
    local dash = string.find(top[1], '-', 1, true)
    local topMs, topSeq = tonumber(string.sub(top[1], 1, dash - 1)), tonumber(string.sub(top[1], dash + 1))
    if topMs > ms then ms = topMs end
    seq = topSeq + 1
  end
  local offset = string.format('%d-%d', ms, seq)
  redis.call('XADD', K[1], offset, 'id', id, 'n', A[2])
  mark('state', 'inbox', 'offset', offset, 'at', now)
  redis.call('SADD', K[3], id)
  -- The new unread version, as the reply gives it (trimming below does not change it).
  local version = redis.call('HINCRBY', K[2], 'uv', 1)

  -- Trim the head: the entries beyond maxLength and those older than maxAgeMs (both are head prefixes,
  -- so the longer of the two is removed). At most 1000 per call keeps one call short; the next append
  -- continues. Unread ids of trimmed entries leave the unread set, so the count stays exact.
  local maxLength, maxAge = tonumber(A[5]), tonumber(A[6])
  local remove = redis.call('XLEN', K[1]) - maxLength
  if remove > 1000 then remove = 1000 end
  local minMs = now - maxAge
  if minMs > 0 and remove < 1000 then
    local old = redis.call('XRANGE', K[1], '-', '(' .. string.format('%d', minMs) .. '-0', 'COUNT', 1000)
    if #old > remove then remove = #old end
  end
  if remove > 0 then
    local head = redis.call('XRANGE', K[1], '-', '+', 'COUNT', remove)
    local ids = {}
    for i, entry in ipairs(head) do
      ids[i] = entry[1]
      local fields = entry[2]
      for f = 1, #fields, 2 do
        if fields[f] == 'id' then redis.call('SREM', K[3], fields[f + 1]) end
      end
    end
    redis.call('XDEL', K[1], unpack(ids))
  end

  redis.call('PEXPIRE', K[1], retention)
  redis.call('PEXPIRE', K[2], retention)
  redis.call('PEXPIRE', K[3], retention)
  redis.call('PEXPIRE', K[4], retention)
  return { 1, offset, redis.call('SCARD', K[3]), version, '' }
end

local replies = {}
for i = 1, tonumber(ARGV[1]) do
  local k, a = 7 * (i - 1), 2 + 11 * (i - 1)
  local K, A = {}, {}
  for j = 1, 7 do K[j] = KEYS[k + j] end
  for j = 1, 11 do A[j] = ARGV[a + j] end
  -- The index first: it says whose notification this is whatever the append records.
  if A[11] ~= '' then redis.call('SET', K[7], A[11], 'PX', tonumber(A[7])) end
  local reply = append(K, A)
  for j = 1, 5 do replies[#replies + 1] = reply[j] end
end
return replies
