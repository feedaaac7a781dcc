--[[
  Token bucket, one bucket: the single-key form of token-bucket-n.lua, with the same semantics, state
  and reply, and no loop or table but the reply (RateLimiter runs it for a call with one bucket; its
  Redis CPU per call is what the benchmark in bench/limiter measures).
  Refill continuously at `rate` tokens/s up to `capacity`, then take `cost` if the bucket has it.
  A denied call writes nothing.

  Code: fragments/token-bucket-one.lua (with policy-args.lua, token-bucket-load.lua, expiry-set.lua),
  put in place of the --#include lines by lua.ts before SCRIPT LOAD (scriptSource('token-bucket', 1)).

  KEYS[1]   the bucket: 25 bytes, struct '<Bddd': format 2, microtokens (1e-6 token) at ts (µs since
            epoch), and the key's expiry (µs, on the same clock), all doubles exactly. Format 1 (the
            same with whole tokens, written by 0.1.0 before this change) is read as tokens * 1e6 so a
            rolling upgrade keeps its buckets. One GET and one SET: PX when the expiry must move (it is
            kept between resetAfterMs + margin/2 and resetAfterMs + margin from now), else KEEPTTL.
            Microtokens because rate (tokens/s) is also microtokens per µs: with integer (or dyadic,
            e.g. 0.5) rates, capacities and costs every quantity is an integer (exact in doubles), so
            remaining, retryAfterMs and resetAfterMs are exact (tokens summed from refills of 0.1 once
            made 1.9999999999999998 and reported 1 left where 2 were).

  ARGV[1]   now           µs since epoch, or "" to read Redis TIME (only tests inject a clock)
  ARGV[2]   ttl margin    ms added to the time to refill fully, for the key's PX (the TTL stays between
                          the time to refill fully + margin/2 and + margin)
  ARGV[3]   capacity      tokens (burst), > 0
  ARGV[4]   rate          tokens per second, > 0
  ARGV[5]   cost          tokens to take, >= 0, <= capacity (0 = peek: nothing is written)

  Returns 6 integers, as token-bucket-n.lua with one key:
    { code, index, allowed (1|0), remaining (whole tokens, floor), retryAfterMs (ceil, 0 when allowed),
      resetAfterMs (ms until full, ceil) }
    code   1 allowed, 0 denied, -1 cost > capacity, -2 invalid argument (see LuaCode in scripts.ts)
    index  1 when denied or on an argument error about the bucket; 0 when allowed
]]
--#include clock.lua
if now == nil or marginMs == nil then return { -2, 0, 0, 0, 0, 0 } end
--#include policy-args.lua
--#   at = 3
--#   invalid = return { -2, 1, 0, 0, 0, 0 }
--#   exceeds = return { -1, 1, 0, 0, 0, 0 }
--#include token-bucket-one.lua
--#   key = KEYS[1]
--#   reply = return {
--#   replyEnd = }
