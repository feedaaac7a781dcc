--[[
  GCRA, one key: the single-key form of gcra-n.lua, with the same semantics, state and reply, and no
  loop or table but the reply. One number per key: the theoretical arrival time (TAT).
  A denied call writes nothing.

  Code: fragments/gcra-one.lua (with policy-args.lua, gcra-load.lua, expiry-set.lua), put in place of
  the --#include lines by lua.ts before SCRIPT LOAD (scriptSource('gcra', 1)).

  KEYS[1]   17 bytes, struct '<Bdd': format 1, the TAT and the key's expiry (doubles, µs since epoch,
            exactly). SET PX when the expiry must move (it is kept between resetAfterMs + margin/2 and
            resetAfterMs + margin from now), else KEEPTTL.

  ARGV[1]   now           µs since epoch, or "" to read Redis TIME (only tests inject a clock)
  ARGV[2]   ttl margin    ms added to the time until the TAT, for the key's PX
  ARGV[3]   capacity      burst, in requests of cost 1, > 0
  ARGV[4]   rate          requests of cost 1 per second, > 0
  ARGV[5]   cost          >= 0, <= capacity (0 = peek: nothing is written)

  Returns 6 integers, as gcra-n.lua with one key:
    { code, index, allowed (1|0), remaining (floor), retryAfterMs (ceil, 0 when allowed),
      resetAfterMs (ms until the TAT, i.e. until full, ceil) }
    code   1 allowed, 0 denied, -1 cost > capacity, -2 invalid argument (see LuaCode in scripts.ts)
    index  1 when denied or on an argument error about the key; 0 when allowed
]]
--#include clock.lua
if now == nil or marginMs == nil then return { -2, 0, 0, 0, 0, 0 } end
--#include policy-args.lua
--#   at = 3
--#   invalid = return { -2, 1, 0, 0, 0, 0 }
--#   exceeds = return { -1, 1, 0, 0, 0, 0 }
--#include gcra-one.lua
--#   key = KEYS[1]
--#   reply = return {
--#   replyEnd = }
