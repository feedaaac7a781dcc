--[[
  GCRA (generic cell rate algorithm) over N policies, all or nothing. One number per key: the
  theoretical arrival time (TAT). Exactly a token bucket of the same capacity refilled one unit per
  `interval` = round(1e6 / rate) whole µs (3/s: 333,333 µs, i.e. 3.000003/s): a bucket holding `tokens`
  is a TAT of now + (capacity - tokens) * interval. Whole µs keep every quantity an integer (exact in
  doubles for integer capacities and costs), so `remaining` = floor(tokens) is exact: with
  interval = 1e6 / 3 a fresh bucket of capacity 7 reported 7 * interval / interval = 6.999999999999999.
  A denied call writes nothing, so it consumes from none.

  `-n`: the number of keys varies per call (one per bucket: a policy may have several ids); it is
  passed as EVAL's numkeys. The caller merges an id given twice (one key appears once).
  Every key of one call must share one hash tag (Redis Cluster: one slot).

  Code: fragments/buckets-n.lua, as token-bucket-n.lua's, with gcra-decide.lua and gcra-take.lua; lua.ts
  puts it in place before SCRIPT LOAD (scriptSource('gcra')).

  KEYS[i]   bucket i: 17 bytes, struct '<Bdd': format 1, the TAT and the key's expiry (doubles, µs since
            epoch, exactly). SET PX when the expiry must
            move (kept between resetAfterMs + margin/2 and + margin from now), else KEEPTTL.
            gcra-1.lua is the same for one key.

  ARGV[1]   now           µs since epoch, or "" to read Redis TIME (only tests inject a clock)
  ARGV[2]   ttl margin    ms added to the time until the TAT, for each key's PX
  then per key i (a bucket of one policy), at ARGV[3 * i], ARGV[3 * i + 1], ARGV[3 * i + 2]:
            capacity      burst, in requests of cost 1, > 0
            rate          requests of cost 1 per second, > 0
            cost          >= 0, <= capacity (0 = peek: nothing is written)

  Returns, always 2 + 4 * N integers:
    { code, index,
      per policy: allowed (1|0), remaining (floor), retryAfterMs (ceil, 0 when this policy alone
      would allow), resetAfterMs (ms until the TAT, i.e. until full, ceil) }
    code   1 allowed, 0 denied, -1 cost > capacity, -2 invalid argument (see LuaCode in scripts.ts)
    index  the denying policy (the one that needs the longest wait), or the policy of the error;
           0 when allowed
]]
--#include buckets-n.lua
--#   decide = gcra-decide.lua
--#   take = gcra-take.lua
