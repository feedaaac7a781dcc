-- idempotency-release-1.lua: releases an Idempotency-Key claim, but only the caller's own.
--
-- KEYS[1]  the idempotency record `<prefix>idem:{<apiKeyId>}:<sha256(key)>`
-- ARGV[1]  the owner token the caller claimed it with (random, per request)
--
-- Returns 1 when the record was the caller's unsettled claim and is gone, 0 otherwise (another
-- request's claim, a stored answer, or nothing). A release sent while Redis stalls reaches Redis after
-- the claim it undoes (same connection, in order), and can never delete a later request's claim.
local raw = redis.call('GET', KEYS[1])
if not raw then return 0 end
local ok, entry = pcall(cjson.decode, raw)
if not ok or type(entry) ~= 'table' or entry.o ~= ARGV[1] or entry.a ~= nil then return 0 end
redis.call('DEL', KEYS[1])
return 1
