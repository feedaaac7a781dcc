--[[
  Registers one push subscription of a user: stored by endpoint (the same endpoint again replaces its
  keys and becomes the newest), at most ARGV[3] kept (the oldest removed), both keys' TTL refreshed.

  KEYS[1]  hash: endpoint -> subscription JSON
  KEYS[2]  sorted set: endpoint, scored by registration order (one more than the newest: no clock,
           so registrations in the same millisecond, or from apps whose clocks differ, keep their order)
  (both under the user's hash tag: one Redis Cluster slot)

  ARGV[1]  endpoint
  ARGV[2]  subscription JSON
  ARGV[3]  max     subscriptions kept per user, >= 1
  ARGV[4]  ttl     ms both keys live after the user's last registration

  Returns, always 2 elements: { count, replaced }
    count     subscriptions the user has now
    replaced  oldest ones removed to make room (0 or more)
]]
local newest = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
local score = (tonumber(newest[2]) or 0) + 1
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[2], score, ARGV[1])
local max = tonumber(ARGV[3])
local replaced = 0
while redis.call('ZCARD', KEYS[2]) > max do
  local oldest = redis.call('ZPOPMIN', KEYS[2], 1)
  redis.call('HDEL', KEYS[1], oldest[1])
  replaced = replaced + 1
end
redis.call('PEXPIRE', KEYS[1], ARGV[4])
redis.call('PEXPIRE', KEYS[2], ARGV[4])
return { redis.call('HLEN', KEYS[1]), replaced }
