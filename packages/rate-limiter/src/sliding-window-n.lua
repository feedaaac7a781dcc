--[[
  Sliding window counter over N policies, all or nothing: the count of the previous fixed window,
  weighted by how much of it still overlaps the sliding window, plus the count of the current one,
  must stay within `capacity` per window of capacity / rate seconds. Kept for comparison with the
  token bucket (an approximation: it assumes the previous window's calls were spread evenly).
  A denied call writes nothing, so it consumes from none.

  `-n`: the number of keys varies per call (one per policy); it is passed as EVAL's numkeys.
  Every key of one call must share one hash tag (Redis Cluster: one slot).
  Shared code (prelude-n.lua, policy-args.lua, deny-track.lua) comes from fragments/ by the --#include
  lines, which lua.ts expands before SCRIPT LOAD (scriptSource('sliding-window')).

  KEYS[i]   counters of policy i: a hash { w = <window index>, c = <count in w>, p = <count in w - 1> }

  ARGV[1]   now           µs since epoch, or "" to read Redis TIME (only tests inject a clock)
  ARGV[2]   ttl margin    ms added to the end of the next window, for each key's PEXPIRE
  then per key i (a bucket of one policy), at ARGV[3 * i], ARGV[3 * i + 1], ARGV[3 * i + 2]:
            capacity      limit per sliding window, > 0
            rate          capacity / window length in seconds, > 0
            cost          >= 0, <= capacity (0 = peek: nothing is written)

  Returns, always 2 + 4 * N integers:
    { code, index,
      per policy: allowed (1|0), remaining (floor), retryAfterMs (ceil, 0 when this policy alone
      would allow), resetAfterMs (ms until nothing is counted any more, ceil) }
    code   1 allowed, 0 denied, -1 cost > capacity, -2 invalid argument (see LuaCode in scripts.ts)
    index  the denying policy (the one that needs the longest wait), or the policy of the error;
           0 when allowed
]]
--#include prelude-n.lua

local capacities, costs, currents, previouses, windows, lengths, weights = {}, {}, {}, {}, {}, {}, {}

for i = 1, n do
  --#include policy-args.lua
  --#   at = 3 * i
  --#   invalid = return fail(-2, i)
  --#   exceeds = return fail(-1, i)

  local length = capacity / rate * 1000000  -- µs
  local window = math.floor(now / length)
  local elapsed = now - window * length     -- µs into the current window
  local state = redis.call('HMGET', KEYS[i], 'w', 'c', 'p')
  local stored = tonumber(state[1])
  local current, previous = 0, 0
  if stored == window then
    current = tonumber(state[2]) or 0
    previous = tonumber(state[3]) or 0
  elseif stored == window - 1 then
    previous = tonumber(state[2]) or 0
  end
  local weight = 1 - elapsed / length       -- share of the previous window still inside
  local estimate = previous * weight + current
  capacities[i], costs[i], currents[i], previouses[i] = capacity, cost, current, previous
  windows[i], lengths[i], weights[i] = window, length, weight

  local waitMs = false
  if estimate + cost > capacity then
    -- Earliest wait t with estimate(now + t) + cost <= capacity, assuming no other admissions:
    -- within this window while the previous window's weight decays, else in the next window
    -- while this window's count decays.
    local room = capacity - current - cost
    local waitUs
    if room >= 0 and previous > 0 and length * (1 - room / previous) - elapsed < length - elapsed then
      waitUs = length * (1 - room / previous) - elapsed
    else
      local intoNext = 0
      if current > 0 then intoNext = math.max(0, length * (1 - (capacity - cost) / current)) end
      waitUs = (length - elapsed) + intoNext
    end
    waitMs = math.max(1, math.ceil(waitUs / 1000))
  end
  --#include deny-track.lua
  --#   denied = waitMs
  --#   wait = waitMs
  --#   slot = 4 * i
end

if not allAllowed then reply[1], reply[2] = 0, denyIndex end

for i = 1, n do
  local current = currents[i]
  local length = lengths[i]
  local untilNextEndUs = (windows[i] + 2) * length - now
  if allAllowed and costs[i] > 0 then
    current = current + costs[i]
    redis.call('HSET', KEYS[i], 'w', string.format('%.17g', windows[i]), 'c', string.format('%.17g', current),
      'p', string.format('%.17g', previouses[i]))
    redis.call('PEXPIRE', KEYS[i], string.format('%d', math.ceil(untilNextEndUs / 1000) + marginMs))
  end
  local estimate = previouses[i] * weights[i] + current
  reply[4 * i] = math.floor(capacities[i] - estimate)
  local resetAfterMs = 0
  if current > 0 then
    resetAfterMs = math.ceil(untilNextEndUs / 1000)
  elseif previouses[i] > 0 then
    resetAfterMs = math.ceil(((windows[i] + 1) * length - now) / 1000)
  end
  reply[4 * i + 2] = resetAfterMs
end
return reply
