-- deny-track.lua: bucket i's verdict in the first pass of an all-or-nothing call. Writes its
-- allowed (1|0) and retryAfterMs slots; a denied bucket clears `allAllowed` and becomes `denyIndex` when
-- it needs the longest wait (`longestWait`) so far.
--   $denied   condition: bucket i lacks the cost
--   $wait     expression: ms until it has it (ceil)
--   $slot     reply index of bucket i's remaining (allowed is $slot - 1, retryAfterMs $slot + 1)
local retryAfterMs = 0
if $denied then
  allAllowed = false
  retryAfterMs = $wait
  if retryAfterMs > longestWait then
    longestWait = retryAfterMs
    denyIndex = i
  end
  reply[$slot - 1] = 0
else
  reply[$slot - 1] = 1
end
reply[$slot + 1] = retryAfterMs
