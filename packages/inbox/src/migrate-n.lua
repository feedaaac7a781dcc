--[[
  Moves some keys of one user (one hash tag: one slot) from the layout of before tenants to a tenant's
  (migrate.ts). RENAME keeps each key's value and TTL.

  KEYS[1..n]        keys of the user in the old layout (`<prefix>{<user>}:…`)
  KEYS[n+1..2n]     their names in the tenant's layout (`<prefix>t:<tenant>:{<user>}:…`), in the same order
  KEYS[2n+1..]      more of the user's names in the tenant's layout to look at in mode `first` (stream,
                    meta, unread, mutes, push subscriptions)

  ARGV[1]  n
  ARGV[2]  mode: `first`, the first of the user's keys this run moves: nothing moves when any of
           KEYS[n+1..] exists (the tenant has the user already: the user is kept whole); `more`, the
           user's move is under way: each key moves unless its new name is taken

  Returns { 1, moved, taken... }: moved, how many keys were renamed; taken, the old names left in place
  because their new name exists (mode `more` only). Or { 0, 0, existing... } when mode `first` found the
  user in the tenant's layout: existing, those names; nothing moved. A key gone meanwhile (expired) is
  skipped.
]]
local n = tonumber(ARGV[1])
if ARGV[2] == 'first' then
  local existing = { 0, 0 }
  for i = n + 1, #KEYS do
    if redis.call('EXISTS', KEYS[i]) == 1 then existing[#existing + 1] = KEYS[i] end
  end
  if #existing > 2 then return existing end
end
local reply = { 1, 0 }
for i = 1, n do
  if redis.call('EXISTS', KEYS[i]) == 1 then
    if redis.call('RENAMENX', KEYS[i], KEYS[n + i]) == 1 then
      reply[2] = reply[2] + 1
    else
      reply[#reply + 1] = KEYS[i]
    end
  end
end
return reply
