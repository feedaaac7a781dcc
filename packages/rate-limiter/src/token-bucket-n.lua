--[[
  Token bucket over N policies, all or nothing: refill every bucket continuously at its rate up to
  its capacity, then take each policy's cost from every bucket only if every bucket has it.
  A denied call writes nothing, so it consumes from none.

  `-n`: the number of keys varies per call (one per bucket: a policy may have several ids); it is
  passed as EVAL's numkeys. The caller merges an id given twice (one key appears once).
  Every key of one call must share one hash tag (Redis Cluster: one slot).

  Code: fragments/buckets-n.lua, the same for gcra-n.lua, with this algorithm's token-bucket-decide.lua
  and token-bucket-take.lua; lua.ts puts it in place before SCRIPT LOAD (scriptSource('token-bucket')).

  KEYS[i]   bucket i: 25 bytes, struct '<Bddd': format 2, microtokens at ts (µs since epoch), and the
            key's expiry (µs, same clock), all doubles exactly (format 1, whole tokens, is read as
            tokens * 1e6; see token-bucket-1.lua for why microtokens). One GET and one SET per key: PX when the expiry must move (it is kept between
            resetAfterMs + margin/2 and resetAfterMs + margin from now), else KEEPTTL.
            token-bucket-1.lua is the same for one key, without the loops.

  ARGV[1]   now           µs since epoch, or "" to read Redis TIME (only tests inject a clock)
  ARGV[2]   ttl margin    ms added to the time to refill fully, for each key's PEXPIRE
  then per key i (a bucket of one policy), at ARGV[3 * i], ARGV[3 * i + 1], ARGV[3 * i + 2]:
            capacity      tokens (burst), > 0
            rate          tokens per second, > 0
            cost          tokens to take, >= 0, <= capacity (0 = peek: nothing is written)

  Returns, always 2 + 4 * N integers:
    { code, index,
      per policy: allowed (1|0), remaining (whole tokens, floor), retryAfterMs (ceil, 0 when this
      policy alone would allow), resetAfterMs (ms until full, ceil) }
    code   1 allowed, 0 denied, -1 cost > capacity, -2 invalid argument (see LuaCode in scripts.ts)
    index  the denying policy (the one that needs the longest wait), or the policy of the error;
           0 when allowed
]]
--#include buckets-n.lua
--#   decide = token-bucket-decide.lua
--#   take = token-bucket-take.lua
