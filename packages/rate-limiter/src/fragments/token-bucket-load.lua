-- token-bucket-load.lua: reads a bucket (token-bucket-1.lua's KEYS[1] format) and refills it up
-- to now. Needs `capacity`, `rate` and `now`; defines `tokens` (microtokens), `ts` (µs), `expAt` (the key's
-- expiry in µs, nil when never written) and `full` (capacity in microtokens).
--   $key      the bucket's key
local tokens, ts, expAt, format
local stored = redis.call('GET', $key)
if stored and #stored == 25 then
  format, tokens, ts, expAt = struct.unpack('<Bddd', stored)
  if format == 1 then
    tokens = tokens * 1000000
  elseif format ~= 2 then
    tokens = nil
  end
end
local full = capacity * 1000000
if tokens == nil then
  tokens = full
  ts = now
end
-- A clock that steps back (an injected one, or a failed-over replica) never removes tokens.
if now > ts then
  tokens = math.min(full, tokens + (now - ts) * rate)
  ts = now
end
