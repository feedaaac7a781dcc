--[[
  Registers one push subscription of a user: stored by endpoint (the same endpoint again replaces its
  keys and becomes the newest), at most ARGV[4] kept (the oldest removed), both keys' TTL refreshed.

  KEYS[1]  hash: endpoint -> subscription JSON
  KEYS[2]  sorted set: endpoint, scored by when it was registered (ms since epoch)
  (both under the user's hash tag: one Redis Cluster slot)

  ARGV[1]  endpoint
  ARGV[2]  subscription JSON
  ARGV[3]  now     ms since epoch (the registration's score)
  ARGV[4]  max     subscriptions kept per user, >= 1
  ARGV[5]  ttl     ms both keys live after the user's last registration

  Returns, always 2 elements: { count, replaced }
    count     subscriptions the user has now
    replaced  oldest ones removed to make room (0 or more)
]]
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[2], tonumber(ARGV[3]), ARGV[1])
local max = tonumber(ARGV[4])
local replaced = 0
while redis.call('ZCARD', KEYS[2]) > max do
  local oldest = redis.call('ZPOPMIN', KEYS[2], 1)
  redis.call('HDEL', KEYS[1], oldest[1])
  replaced = replaced + 1
end
redis.call('PEXPIRE', KEYS[1], ARGV[5])
redis.call('PEXPIRE', KEYS[2], ARGV[5])
return { redis.call('HLEN', KEYS[1]), replaced }
