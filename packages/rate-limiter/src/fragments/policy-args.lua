-- policy-args.lua: one bucket's arguments, three ARGV in a row. Defines `capacity`, `rate`
-- (> 0) and `cost` (>= 0, <= capacity), and runs a statement when they are not:
--   $at       ARGV index of the capacity (rate and cost follow). Written as `1 + $at` and `2 + $at` so
--             that a constant `$at` (3) or one of the form `1 + a` folds to one constant or one addition.
--   $invalid  statement for an argument that is not a number or out of range (`return ...`, or an
--             assignment ending in `break`)
--   $exceeds  statement for cost > capacity
local capacity = tonumber(ARGV[$at])
local rate = tonumber(ARGV[1 + $at])
local cost = tonumber(ARGV[2 + $at])
if capacity == nil or rate == nil or cost == nil or capacity <= 0 or rate <= 0 or cost < 0 then
  $invalid
elseif cost > capacity then
  $exceeds
end
