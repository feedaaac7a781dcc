-- expiry-set.lua: writes a bucket that was taken from, which is full again in `resetMs` ms.
-- The key must outlive the refill: its expiry stays while at least resetMs + margin/2 away (KEEPTTL leaves
-- Redis's expires table alone: ~0.7 µs less per call), else it moves to resetMs + margin from now.
-- Needs `now`, `marginMs` and `resetMs` (whole ms both). The PX goes as a string: redis.call would write
-- a Lua number with %.17g, which cost ~5 % of the batch script's Redis time per decision.
--   $key      the bucket's key
--   $state    struct.pack's format and the fields before the expiry (e.g. '<Bdd', 1, tat)
--   $expAt    the key's stored expiry (µs, same clock as now), or nil/false when unknown
if $expAt and $expAt >= now + (resetMs + marginMs / 2) * 1000 then
  redis.call('SET', $key, struct.pack($state, $expAt), 'KEEPTTL')
else
  redis.call('SET', $key, struct.pack($state, now + (resetMs + marginMs) * 1000), 'PX',
    string.format('%d', resetMs + marginMs))
end
