--[[
  GCRA, M independent calls in one script call: what RateLimiter sends for the GCRA calls of one limiter
  made in the same tick (`batchCalls`), one bucket or several each. Each call is exactly gcra-n.lua's
  (all or nothing over its own buckets; gcra-1.lua's for one bucket), taken in order on one Redis TIME,
  so the batch decides as those calls would one after the other at one instant: a key may appear in
  several calls, and each call sees the previous ones' writes. One EVALSHA, one TIME and one reply for
  M calls instead of M of each. Same layout as token-bucket-m.lua.

  Code: fragments/buckets-m.lua, as token-bucket-m.lua's, with gcra-one.lua, gcra-decide.lua and
  gcra-take.lua; lua.ts puts it in place before SCRIPT LOAD (batchScriptSource('gcra')).

  KEYS      the buckets of call 1, then those of call 2, … (within one call every key once: the caller
            merges an id given twice), in gcra-n.lua's state (struct '<Bdd')

  ARGV[1]   now           µs since epoch, or "" to read Redis TIME (only tests inject a clock)
  ARGV[2]   ttl margin    ms, as in gcra-n.lua
  then per call, in KEYS order:
            n             number of buckets of the call (>= 1): its next n keys in KEYS
            then per bucket i of the call, 3 values:
              capacity    burst, in requests of cost 1, > 0
              rate        requests of cost 1 per second, > 0
              cost        >= 0, <= capacity (0 = peek: nothing is written)

  Returns per call, in order, gcra-n.lua's reply for that call: 2 + 4 * n integers
    { code, index, per bucket: allowed (1|0), remaining (floor), retryAfterMs (ceil), resetAfterMs (ceil) }
    code   1 allowed, 0 denied, -1 cost > capacity, -2 invalid argument (see LuaCode in scripts.ts)
    index  the denying bucket of the call (longest wait) or the bucket of the error; 0 when allowed
  A malformed layout (n missing or < 1, or more keys than KEYS) is an error reply: only a caller bug
  makes one, and no call of the batch is decided.
]]
--#include buckets-m.lua
--#   script = gcra-m.lua
--#   one = gcra-one.lua
--#   decide = gcra-decide.lua
--#   take = gcra-take.lua
