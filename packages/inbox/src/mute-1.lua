--[[
  Adds mutes to one user's set of mutes, all or none: refused whole when the set would hold more than
  `max` members (a set that big would only be a mistake or an attack, and it is read on every append).

  KEYS[1]  mutes    set of the user's mutes: `topic:<name>` and `type:<name>` (see append-n.lua); no TTL

  ARGV[1]  max       most members the set may hold, >= 1
  ARGV[2…] members   the mutes to add (`topic:<name>` / `type:<name>`), at least one, each once

  Returns, always 3 elements: { code, added, size }: code 1 and the number of members added (those
  there already are not counted), or code 0 and nothing added when the members now plus the new ones
  would pass `max`; size is the set's size after the call.
]]
local max = tonumber(ARGV[1])
local members = {}
for i = 2, #ARGV do members[#members + 1] = ARGV[i] end
local present = redis.call('SMISMEMBER', KEYS[1], unpack(members))
local new = 0
for _, flag in ipairs(present) do
  if flag == 0 then new = new + 1 end
end
local size = redis.call('SCARD', KEYS[1])
if size + new > max then return { 0, 0, size } end
if new == 0 then return { 1, 0, size } end
redis.call('SADD', KEYS[1], unpack(members))
return { 1, new, size + new }
