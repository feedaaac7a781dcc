-- prelude-n.lua: the opening of an N-key script (`-n`: one key per bucket; reply { code, index, then 4
-- integers per bucket }, all or nothing). Defines `n` (#KEYS); `fail(code, index)`, the whole reply of a
-- call that decides nothing (code, index, zeros); `now` and `marginMs` (clock.lua), a bad one answered
-- fail(-2, 0); `reply` = { 1, 0 } (allowed, until a bucket denies) and the first pass's verdict:
-- `allAllowed`, `denyIndex` and `longestWait` (deny-track.lua).
local n = #KEYS

local function fail(code, index)
  local reply = { code, index }
  for i = 1, 4 * n do reply[2 + i] = 0 end
  return reply
end

--#include clock.lua
if now == nil or marginMs == nil then return fail(-2, 0) end

local reply = { 1, 0 }
local allAllowed = true
local denyIndex, longestWait = 0, -1
