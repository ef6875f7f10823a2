-- The fit rule of include/vramd/ledger/fit.h, for the scripts (they cannot
-- call C++): a prelude placed before reserve.lua (WriteScript). Change both
-- together: tests/data/fit_cases.json runs against both (unit and
-- integration tiers). Numbers are bytes and server milliseconds (exact in
-- Lua below 2^53).
-- fit_usage_counts(count_usage, ts, now, max_age): whether a usage report
--   stamped ts (nil or 0: none) counts as U at now: the policy counts usage
--   (FitPolicy::count_usage) and the report is at most max_age ms old (one
--   from the future counts). Otherwise U = A.
-- fit_has_room(cap, alloc, used, per): whether per bytes fit a GPU with
--   capacity cap, allocation alloc and usage used: per <= cap - max(A, U)
--   (HasRoom; the comparison is FitsIn's: an exact fit fits).
local function fit_usage_counts(count_usage, ts, now, max_age)
  return count_usage and ts ~= nil and ts > 0 and now - ts <= max_age
end
local function fit_has_room(cap, alloc, used, per)
  local taken = alloc
  if used > taken then taken = used end
  return per <= cap - taken
end
