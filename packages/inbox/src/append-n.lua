--[[
  Appends notifications to their users' inboxes, idempotently, and trims each inbox exactly: K of them
  in one call (the worker gathers the appends of one event-loop turn, so that an envelope of many
  notifications costs one script call, not one each), in the order given.

  Offsets are stream ids `<ms>-<seq>`: `seq` is the top entry's seq + 1 (1, 2, 3, … per user, no holes,
  so that a reader can tell a gap from a quiet period) and `ms` never goes below the top entry's.
  Trimming removes entries from the head only, so a reader that sees seq n followed by seq m > n + 1
  knows that the entries in between were trimmed.

  The top offset, the length and a lower bound of the head entry's ms are kept in the meta hash, so that
  an append reads neither the top entry (XREVRANGE copies its JSON: the dearest command of the old
  script) nor, while the head is younger than maxAgeMs, the head. They are trusted only when `n` equals
  XLEN: a meta without them (written before they existed, or recreated by read-3.lua's HINCRBY after it
  expired) or out of step with the stream (a key deleted, evicted, or entries added or removed by hand)
  is read again from the stream, and an XADD refused because the cached top is behind the stream's is
  retried after reading it. Only this script changes the stream, so only it writes them. Not detected
  (a check after the top, even an empty XREVRANGE, cost 6 % of the script): a meta and a stream of the
  same length but different tops, which takes a partial restore (one of the two keys from another
  time) or a hand edit of both; the numbering then goes on from the meta's top.

  One call reads a user's meta (HMGET, XLEN, SCARD) once, at that user's first notification, and writes
  it (HSET, and PEXPIRE of stream, meta and unread when their expiry is due: see flush) once, after that
  user's last one; the replies are those
  of the notifications run one after another. A call that fails (a key of the wrong type) first writes
  the meta of the users it changed, so the data it leaves is as complete as the old script's.

  Every key of one notification shares its user's hash tag. On Redis Cluster one call carries the
  notifications of users whose slots one node serves (and no index key: the caller writes those beside
  the call): KEYS declares those of one slot, which routes the call, and the others' keys follow ARGV.
  A script without a shebang may touch keys of other slots its node serves (Redis 7's default for EVAL,
  kept for compatibility); one it does not serve (a slot moved since the caller read the slot table)
  fails the call, which the caller then runs again notification by notification (append-batch.ts),
  and one slot per call for a while.

  KEYS, 7 per notification i (k = 7 * (i - 1)):
  KEYS[k+1]  stream   the inbox: XADD entries with fields `id` (notification id) and `n` (JSON)
  KEYS[k+2]  meta     hash: `uv` = unread version, incremented on every change of the unread set (also by
                      read-3.lua), and started at Redis's time in ms × 1000 when the meta is (re)created
                      (an idle inbox expires whole: its next version must still be higher than the last
                      one a client kept); written by this script only: `c` = struct '<Bddddd': format 1, then
                      tm, ts = the top entry's ms and seq, n = XLEN, hm = ms, at most that of the head
                      entry (0 when unknown), xa = ms at which stream, meta and unread expire (their last
                      PEXPIRE; 0 when unknown), one field read and written without a number parsed or
                      formatted each (`tonumber` of a string costs two strtod calls); and `n` = -1, which
                      the script before `c` (fields `tm`, `ts`, `n`, `hm`, `xa`) never took for XLEN, so
                      that it reads the stream instead of its own stale fields while both run (an upgrade).
                      Its fields are trusted only while `n` is still -1: a number there means it wrote
                      since, and `c` is stale. What it left is deleted once (`tm` present).
  KEYS[k+3]  unread   set of the ids of unread notifications still in the stream
  KEYS[k+4]  marker   hash of this notification: state (inbox|expired|deduplicated|cancelled|muted), offset,
                      at (ms), duplicateOf, mutedBy, deliveredAt (ms), deliveredBy, createdAt (of one not
                      stored: its JSON's; cancel-2.lua's caller's); the idempotency marker;
                      `user` (its owner) when the id is routed (keys.ts: the key is found from the id alone)
  KEYS[k+5]  dedupe   string: the id of the first notification with this dedupe key (unused when hasDedupe = 0)
  KEYS[k+6]  mutes    set of the user's mutes: `topic:<name>` and `type:<name>` (preferences.ts); no TTL
  KEYS[k+7]  index    string: notification id -> user id (`<prefix>id:{<id>}`), set when ARGV indexUser is
                      not ""; for a routed id (ARGV routed > 0) the marker it would have under the user's
                      keys (`<prefix>{<user>}:n:<id>`), where a worker from before routed ids stored it:
                      read for idempotency on a re-run (routed = 2) when KEYS[k+4] is empty, never
                      written; else any key of this notification (unused)

  ARGV[1]  count         K, >= 1
  ARGV[2]  now           ms since epoch, or "" to read Redis TIME (only tests inject a clock)
  then 12 per notification i (a = 2 + 12 * (i - 1)):
  ARGV[a+1]  id            notification id
  ARGV[a+2]  json          the notification as JSON, without its offset
  ARGV[a+3]  deadline      ms since epoch after which the notification has expired; 0 = never
  ARGV[a+4]  hasDedupe     1 when KEYS[k+5] is a real dedupe key, else 0
  ARGV[a+5]  maxLength     entries kept per inbox, >= 1
  ARGV[a+6]  maxAgeMs      entries older than this (by offset ms) are trimmed, ms, >= 1
  ARGV[a+7]  retentionMs   TTL of every key touched (markers, dedupe keys, index), ms, >= maxAgeMs; the
                          stream, meta and unread set get between it and it + 1 % (see flush)
  ARGV[a+8]  tenantId      sender's tenant, kept in the marker ("" = none)
  ARGV[a+9]  topicMute     `topic:<the notification's topic>`, or "" when it has none
  ARGV[a+10] typeMute      `type:<the notification's type>`, or "" when it has none
  ARGV[a+11] indexUser     the user id to write at KEYS[k+7] (for a routed id: as the marker's `user`), or ""
                          to write no index here
  ARGV[a+12] routed        0, or 1 when KEYS[k+4] is the marker of a routed id (keys.ts), 2 when it is and
                          the notification may have been stored by a worker from before routed ids (its
                          job runs again: stalled or retried)
  then, when KEYS holds fewer than 7 × count keys (D notifications' worth): the keys of notifications
  D + 1 … count, 7 each as in KEYS

  Returns 5 elements per notification, in order: { code, offset, unreadCount, unreadVersion, detail, … }
    code  1 appended now, 2 appended before (offset of that append), 3 expired, 4 deduplicated,
          5 cancelled before it was stored (cancel-2.lua), 6 muted: the user muted its topic or type, so
          nothing is stored (see AppendCode in scripts.ts); offset is "" unless the notification is in
          the inbox; detail is the first notification's id for code 4, the mute (`topic:<name>` or
          `type:<name>`) for code 6, else "".
]]
-- Numbers given to redis.call are written with "%.17g" (about 1 µs each): the arguments go as strings.
local now, nowText
if ARGV[2] == '' then
  local time = redis.call('TIME')
  local ms = math.floor(tonumber(time[2]) / 1000)
  now = tonumber(time[1]) * 1000 + ms
  nowText = time[1] .. string.format('%03d', ms)
else
  now = tonumber(ARGV[2])
  nowText = string.format('%d', now)
end
local count = tonumber(ARGV[1])
-- The keys, 7 per notification: KEYS for the first #KEYS / 7, then (a call across slots of one Cluster
-- node, see below) the others' from the end of ARGV.
local K = KEYS
if #KEYS < 7 * count then
  K = {}
  for j = 1, #KEYS do K[j] = KEYS[j] end
  local from = 2 + 12 * count - #KEYS
  for j = #KEYS + 1, 7 * count do K[j] = ARGV[from + j] end
end
-- The numbers of ARGV a call repeats (bounds, retention, deadline 0), each parsed once per call.
local numbers = {}
local function number(text)
  local value = numbers[text]
  if value == nil then
    value = tonumber(text)
    numbers[text] = value
  end
  return value
end
local codes = { inbox = 2, expired = 3, deduplicated = 4, cancelled = 5, muted = 6 }

-- The ms and seq of a stream id.
local function split(id)
  local dash = string.find(id, '-', 1, true)
  return tonumber(string.sub(id, 1, dash - 1)), tonumber(string.sub(id, dash + 1))
end

-- The user's state, by stream key, from the user's first notification in this call to the flush after
-- the last one: uv, unread count (SCARD, then what SADD and SREM answer), top (tm, ts) once known, n,
-- hm, whether anything was appended (dirty), whether the user has mutes (0 until asked, then 1 or -1).
local users = {}
local last = {}
for i = 1, count do last[K[7 * (i - 1) + 1]] = i end

local function load(k)
  local stream = K[k + 1]
  local u = users[stream]
  if u then return u end
  local meta = redis.call('HMGET', K[k + 2], 'uv', 'c', 'n', 'tm')
  local n = redis.call('XLEN', stream)
  -- Every field in the constructor: a field added later would resize the table.
  u = { stream = stream, meta = K[k + 2], unread = K[k + 3], uv = meta[1] and tonumber(meta[1]) or now * 1000,
    count = redis.call('SCARD', K[k + 3]), n = n, hm = 0, tm = false, ts = 0, mutes = 0, dirty = false,
    retention = '', xa = false, old = meta[4] ~= false }
  -- Trusted when this script wrote it last and the length is the stream's; else read from the stream
  -- when appending.
  local c = meta[2]
  if c and meta[3] == '-1' and #c == 41 and string.byte(c, 1) == 1 then
    local tm, ts, cn, hm, xa = struct.unpack('<ddddd', c, 2)
    if cn == n then
      u.tm, u.ts, u.hm = tm, ts, hm
      -- The expiry the three keys were given, trusted only when none of them can have been made since
      -- without one: the stream not empty, the unread set there (read-3.lua deletes it when all is read).
      if xa > 0 and n > 0 and u.count > 0 then u.xa = xa end
    end
  end
  users[stream] = u
  return u
end

-- The top offset from the stream itself (meta without it or out of step).
local function readTop(u)
  local top = redis.call('XREVRANGE', u.stream, '+', '-', 'COUNT', 1)[1]
  if top then u.tm, u.ts = split(top[1]) else u.tm, u.ts = 0, 0 end
end

-- The stream, the meta and the unread set expire together, between retention and retention + 1 % after
-- the user's last append: their PEXPIREs (3 of a user's ~13 commands per call) are sent only when the
-- expiry they were given (`xa`, in the meta) is less than retention away, or more than retention + 1 %.
local function flush(u)
  if u.dirty then
    local retention = number(u.retention)
    local xa = u.xa
    local fresh = xa and xa - now >= retention and xa - now <= retention + math.floor(retention / 100)
    local ttl
    if not fresh then
      ttl = retention + math.floor(retention / 100)
      xa = now + ttl
    end
    redis.call('HSET', u.meta, 'uv', string.format('%d', u.uv), 'c', struct.pack('<Bddddd', 1, u.tm, u.ts, u.n, u.hm,
      xa or 0), 'n', '-1')
    if not fresh then
      local ttlText = string.format('%d', ttl)
      redis.call('PEXPIRE', u.stream, ttlText)
      redis.call('PEXPIRE', u.meta, ttlText)
      redis.call('PEXPIRE', u.unread, ttlText)
      u.xa = xa
    end
    -- The fields of the script before `c`, once: stale from now on.
    if u.old then
      redis.call('HDEL', u.meta, 'tm', 'ts', 'hm', 'xa')
      u.old = false
    end
    u.dirty = false
  end
end


local replies = {}
local r = 0
local function answer(code, offset, u, detail)
  replies[r + 1], replies[r + 2], replies[r + 3], replies[r + 4], replies[r + 5] =
    code, offset, u.count, u.uv, detail
  r = r + 5
end

-- HSET of a marker, with the sender's tenant and the owner of a routed marker when there are (one
-- command, not two).
local function mark(marker, tenant, owner, ...)
  if owner ~= '' then
    if tenant ~= '' then
      redis.call('HSET', marker, 'tenantId', tenant, 'user', owner, ...)
    else
      redis.call('HSET', marker, 'user', owner, ...)
    end
  elseif tenant ~= '' then
    redis.call('HSET', marker, 'tenantId', tenant, ...)
  else
    redis.call('HSET', marker, ...)
  end
end

-- The notifications, in order. A command that fails (a key of the wrong type) ends the call: the users
-- changed so far are written first (flush), then the error is raised (one pcall for the whole call, not
-- one per command).
local function run()
  for i = 1, count do
    local k, a = 7 * (i - 1), 2 + 12 * (i - 1)
    local id, marker, tenant = ARGV[a + 1], K[k + 4], ARGV[a + 8]
    local retention = ARGV[a + 7]
    -- The index first: it says whose notification this is whatever the append records (a routed marker
    -- says it itself).
    local owner, routed = '', ARGV[a + 12] ~= '0'
    if routed then
      owner = ARGV[a + 11]
    elseif ARGV[a + 11] ~= '' then
      redis.call('SET', K[k + 7], ARGV[a + 11], 'PX', retention)
    end
    local u = load(k)

    -- Idempotency: a notification processed again (stalled job, retry) answers what the first pass did;
    -- one cancelled before this pass (cancel-2.lua) stays cancelled, and one muted stays muted (an unmute
    -- meanwhile does not store it on a retry).
    local previous = redis.call('HMGET', marker, 'state', 'offset', 'duplicateOf', 'mutedBy')
    -- A routed id stored (or cancelled) by a worker or gateway from before routed ids: its marker is
    -- under the user's keys.
    if ARGV[a + 12] == '2' and not previous[1] then
      previous = redis.call('HMGET', K[k + 7], 'state', 'offset', 'duplicateOf', 'mutedBy')
    end
    local deadline = number(ARGV[a + 3])
    local state, field, detail
    if previous[1] then
      answer(codes[previous[1]] or 2, previous[2] or '', u, previous[3] or previous[4] or '')
    elseif deadline > 0 and now > deadline then
      state = 'expired'
    else
      -- Muted: not stored at all (stored but not pushed would reach the screen anyway: the next gapless
      -- offset makes a reader fill the gap, and the unread count would count it). Before the dedupe key: a
      -- muted notification does not hold its dedupe key against a later one. Most users mute nothing: one
      -- SCARD per user and call spares them the lookups.
      local topic, kind = ARGV[a + 9], ARGV[a + 10]
      if (topic ~= '' or kind ~= '') and u.mutes == 0 then u.mutes = redis.call('SCARD', K[k + 6]) > 0 and 1 or -1 end
      if u.mutes == 1 then
        if topic ~= '' and redis.call('SISMEMBER', K[k + 6], topic) == 1 then
          state, field, detail = 'muted', 'mutedBy', topic
        elseif kind ~= '' and redis.call('SISMEMBER', K[k + 6], kind) == 1 then
          state, field, detail = 'muted', 'mutedBy', kind
        end
      end
      if not state and ARGV[a + 4] == '1' then
        local first = redis.call('GET', K[k + 5])
        if first and first ~= id then
          state, field, detail = 'deduplicated', 'duplicateOf', first
        else
          redis.call('SET', K[k + 5], id, 'PX', retention)
        end
      end
      if not state then
        local stream = u.stream
        if not u.tm then readTop(u) end
        local ms, seq = now, u.ts + 1
        if u.tm > ms then ms = u.tm end
        local offset = string.format('%d-%d', ms, seq)
        if type(redis.pcall('XADD', stream, offset, 'id', id, 'n', ARGV[a + 2])) == 'table' then
          -- Refused (an error table): the cached top is behind the stream's, at this ms. Read it.
          readTop(u)
          ms, seq = now, u.ts + 1
          if u.tm > ms then ms = u.tm end
          offset = string.format('%d-%d', ms, seq)
          redis.call('XADD', stream, offset, 'id', id, 'n', ARGV[a + 2])
        end
        if u.n == 0 then u.hm = ms end
        u.tm, u.ts, u.n, u.dirty = ms, seq, u.n + 1, true
        u.retention = retention
        mark(marker, tenant, owner, 'state', 'inbox', 'offset', offset, 'at', nowText)
        redis.call('PEXPIRE', marker, retention)
        u.count = u.count + redis.call('SADD', u.unread, id)
        -- The new unread version, as the reply gives it (trimming below does not change it).
        u.uv = u.uv + 1

        -- Trim the head: the entries beyond maxLength and those older than maxAgeMs (both are head
        -- prefixes, so the longer of the two is removed). At most 1000 per call keeps one call short; the
        -- next append continues. Unread ids of trimmed entries leave the unread set, so the count stays
        -- exact. `hm` (at most the head's ms) spares the age XRANGE while no entry can be that old.
        local remove = u.n - number(ARGV[a + 5])
        if remove > 1000 then remove = 1000 end
        local minMs = now - number(ARGV[a + 6])
        local old
        if minMs > 0 and remove < 1000 and u.hm < minMs then
          old = redis.call('XRANGE', stream, '-', '(' .. string.format('%d', minMs) .. '-0', 'COUNT', 1000)
          if #old > remove then remove = #old end
        end
        if remove > 0 then
          local head = old
          if not head or #head < remove then head = redis.call('XRANGE', stream, '-', '+', 'COUNT', remove) end
          local ids, members = {}, {}
          for e = 1, remove do
            local entry = head[e]
            ids[e] = entry[1]
            local fields = entry[2]
            for f = 1, #fields, 2 do
              if fields[f] == 'id' then members[#members + 1] = fields[f + 1] end
            end
          end
          u.n = u.n - redis.call('XDEL', stream, unpack(ids))
          if #members > 0 then u.count = u.count - redis.call('SREM', u.unread, unpack(members)) end
          -- What remains is at least as young as the last entry removed.
          local lastMs = split(ids[remove])
          if lastMs > u.hm then u.hm = lastMs end
        end
        -- Every entry older than minMs was in `old` (fewer than 1000) and is gone now.
        if old and #old < 1000 and minMs > u.hm then u.hm = minMs end
        answer(1, offset, u, '')
      end
    end
    if state then
      -- Its `createdAt` (in its JSON) too: its status keeps it once its job is gone, as a stored one's
      -- inbox entry does. Decoded on this path only (expired, muted, deduplicated: the rare ones).
      local fields = { 'state', state, 'at', nowText }
      if field then fields[5], fields[6] = field, detail end
      local decoded, notification = pcall(cjson.decode, ARGV[a + 2])
      if decoded and type(notification) == 'table' and type(notification.createdAt) == 'string' then
        fields[#fields + 1], fields[#fields + 2] = 'createdAt', notification.createdAt
      end
      mark(marker, tenant, owner, unpack(fields))
      redis.call('PEXPIRE', marker, retention)
      answer(state == 'expired' and 3 or state == 'muted' and 6 or 4, '', u, detail or '')
    end
    if last[u.stream] == i then flush(u) end
  end
end

local ok, failure = pcall(run)
if not ok then
  for _, u in pairs(users) do flush(u) end
  error(failure)
end
return replies
