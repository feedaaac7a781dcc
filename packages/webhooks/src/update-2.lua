--[[
  Changes a tenant's webhook only while it exists, in one step: a write that raced a DELETE between a
  read and its HSET brought back part of the hash (a `secret` without a `url`, or a `state`), and a
  PUT after that found the secret and answered 200 without showing it: every message was then signed with
  a secret the tenant never saw.

  Both keys share the tenant's hash tag (Redis Cluster: one slot).

  KEYS[1]  config   hash of the tenant's webhook (exists while it has a `url`)
  KEYS[2]  held     list of held messages (JSON webhook jobs), oldest first

  ARGV[1]  op       rotate | succeeded | failed | resume
  rotate:     ARGV[2] new secret, ARGV[3] previousSecretUntil (ms), ARGV[4] updatedAt (ISO)
  succeeded:  ARGV[2] lastSuccessAt (ISO)
  failed:     ARGV[2] lastError, ARGV[3] parkAfter (failures in a row), ARGV[4] parkedAt (ISO)
  resume:     ARGV[2] updatedAt (ISO)

  Returns false when there is no webhook; else rotate and succeeded: 1; failed: the failures in a row
  (parked once they reach parkAfter); resume: the held messages (JSON), oldest first.
]]
if redis.call('HEXISTS', KEYS[1], 'url') == 0 then return false end
local op = ARGV[1]
if op == 'rotate' then
  local current = redis.call('HGET', KEYS[1], 'secret')
  redis.call('HSET', KEYS[1], 'secret', ARGV[2], 'previousSecret', current or '', 'previousSecretUntil', ARGV[3],
    'updatedAt', ARGV[4])
  return 1
elseif op == 'succeeded' then
  redis.call('HSET', KEYS[1], 'failures', '0', 'lastSuccessAt', ARGV[2])
  return 1
elseif op == 'failed' then
  local failures = redis.call('HINCRBY', KEYS[1], 'failures', 1)
  redis.call('HSET', KEYS[1], 'lastError', ARGV[2])
  if failures >= tonumber(ARGV[3]) then
    redis.call('HSET', KEYS[1], 'state', 'parked')
    redis.call('HSETNX', KEYS[1], 'parkedAt', ARGV[4])
  end
  return failures
elseif op == 'resume' then
  redis.call('HSET', KEYS[1], 'state', 'active', 'failures', '0', 'updatedAt', ARGV[2])
  redis.call('HDEL', KEYS[1], 'parkedAt')
  return redis.call('LRANGE', KEYS[2], 0, -1)
end
return redis.error_reply('unknown webhook update ' .. tostring(op))
