-- idempotency-begin-1.lua: claims an Idempotency-Key, unless it has a record, and answers the key's
-- epoch: the notification id is derived from it, so that a retry gets the same id and a reuse of the
-- key after its lifetime a new one.
--
-- KEYS[1]  the idempotency record `<prefix>idem:{<apiKeyId>}:<sha256(key)>`
-- KEYS[2]  the key's epoch `<prefix>idem:{<apiKeyId>}:e:<sha256(key)>`: ms (Redis time) of the first
--          claim of the key's current lifetime. It outlives the record, which a release (a refused or
--          failed request), a takeover (a claim whose gateway died) or a hand removes: the retry
--          after any of these is within the lifetime, and gets the same epoch.
-- ARGV[1]  the claim (JSON: fingerprint and owner token)
-- ARGV[2]  the claim's PX: ms it holds the key in flight
-- ARGV[3]  the key's lifetime, ms (HERALD_IDEMPOTENCY_TTL_SECONDS): a claim that long after the epoch or
--          more is a new request, with a new epoch
-- ARGV[4]  the epoch key's PX, ms: more than the lifetime, so that it outlives the record
--
-- Returns { record } when the key has a record (a claim in flight, or a stored answer: nothing changes),
-- else { false, epoch } (the key is now claimed).
local previous = redis.call('GET', KEYS[1])
if previous then return { previous } end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local epoch = redis.call('GET', KEYS[2])
if not epoch or not tonumber(epoch) or now - tonumber(epoch) >= tonumber(ARGV[3]) then
  epoch = string.format('%d', now)
end
redis.call('SET', KEYS[2], epoch, 'PX', ARGV[4])
return { false, epoch }
