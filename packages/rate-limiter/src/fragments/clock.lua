-- clock.lua: the first two ARGV of every rate-limiter script. Defines `now` (µs since epoch:
-- ARGV[1], or Redis TIME when ARGV[1] is "") and `marginMs` (ARGV[2], ms); either is nil when its
-- argument is not a number, which the including script answers (invalid argument, index 0).
local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  now = tonumber(ARGV[1])
end
local marginMs = tonumber(ARGV[2])
