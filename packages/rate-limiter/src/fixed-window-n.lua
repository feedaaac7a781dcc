--[[
  Fixed window counter over N policies, all or nothing: at most `capacity` per window of
  capacity / rate seconds, the window aligned to the epoch. Kept for comparison with the token
  bucket: across a window edge it admits up to 2 x capacity in a moment.
  A denied call writes nothing, so it consumes from none.

  `-n`: the number of keys varies per call (one per policy); it is passed as EVAL's numkeys.
  Every key of one call must share one hash tag (Redis Cluster: one slot).
  Shared code (prelude-n.lua, policy-args.lua, deny-track.lua) comes from fragments/ by the --#include
  lines, which lua.ts expands before SCRIPT LOAD (scriptSource('fixed-window')).

  KEYS[i]   counter of policy i: a hash { w = <window index>, c = <count in window w> }

  ARGV[1]   now           µs since epoch, or "" to read Redis TIME (only tests inject a clock)
  ARGV[2]   ttl margin    ms added to the end of the window, for each key's PEXPIRE
  then per key i (a bucket of one policy), at ARGV[3 * i], ARGV[3 * i + 1], ARGV[3 * i + 2]:
            capacity      limit per window, > 0
            rate          capacity / window length in seconds, > 0
            cost          >= 0, <= capacity (0 = peek: nothing is written)

  Returns, always 2 + 4 * N integers:
    { code, index,
      per policy: allowed (1|0), remaining (floor), retryAfterMs (ceil, 0 when this policy alone
      would allow), resetAfterMs (ms until the window ends, 0 when nothing is counted; ceil) }
    code   1 allowed, 0 denied, -1 cost > capacity, -2 invalid argument (see LuaCode in scripts.ts)
    index  the denying policy (the one that needs the longest wait), or the policy of the error;
           0 when allowed
]]
--#include prelude-n.lua

local capacities, costs, counts, windows, ends = {}, {}, {}, {}, {}

for i = 1, n do
  --#include policy-args.lua
  --#   at = 3 * i
  --#   invalid = return fail(-2, i)
  --#   exceeds = return fail(-1, i)

  local length = capacity / rate * 1000000  -- µs
  local window = math.floor(now / length)
  local state = redis.call('HMGET', KEYS[i], 'w', 'c')
  local count = 0
  if tonumber(state[1]) == window then count = tonumber(state[2]) or 0 end
  local windowEnd = (window + 1) * length
  capacities[i], costs[i], counts[i], windows[i], ends[i] = capacity, cost, count, window, windowEnd
  --#include deny-track.lua
  --#   denied = count + cost > capacity
  --#   wait = math.max(1, math.ceil((windowEnd - now) / 1000))
  --#   slot = 4 * i
end

if not allAllowed then reply[1], reply[2] = 0, denyIndex end

for i = 1, n do
  local count = counts[i]
  local untilEndMs = math.ceil((ends[i] - now) / 1000)
  if allAllowed and costs[i] > 0 then
    count = count + costs[i]
    redis.call('HSET', KEYS[i], 'w', string.format('%.17g', windows[i]), 'c', string.format('%.17g', count))
    redis.call('PEXPIRE', KEYS[i], string.format('%d', untilEndMs + marginMs))
  end
  reply[4 * i] = math.floor(capacities[i] - count)
  reply[4 * i + 2] = (count > 0) and untilEndMs or 0
end
return reply
