-- The fit rule of include/vramd/ledger/fit.h, for the scripts (they cannot
-- call C++): a prelude placed before reserve.lua (WriteScript). Change both
-- together: tests/data/fit_cases.json runs against both (unit and
-- integration tiers). Numbers are bytes and server milliseconds (exact in
-- Lua below 2^53).
-- fit_usage_counts(count_usage, ts, now, max_age): whether a usage report
--   stamped ts (nil or 0: none) counts as U at now: the policy counts usage
--   (FitPolicy::count_usage) and the report is at most max_age ms old and
--   at most FIT_FUTURE_TOLERANCE_MS ahead of now (kUsageFutureToleranceMs).
--   Otherwise U = A.
-- fit_has_room(cap, alloc, used, per): whether per bytes fit a GPU with
--   capacity cap, allocation alloc and usage used: per <= cap - max(A, U)
--   (HasRoom; the comparison is FitsIn's: an exact fit fits).
-- fit_entry_peak(e): what an entry (its decoded JSON) adds to each of its
--   GPUs' peak demand P and victim cover V (AddToPeak): max(per_gpu,
--   peak_per_gpu) and, for a designated victim, per_gpu.
-- fit_peak_ok(cap, p, v, ratio): the peak rule's invariant (PeakOk):
--   p <= cap, or p - cap <= v and p <= floor(ratio x cap), in doubles as C++.
local FIT_FUTURE_TOLERANCE_MS = 5000
local function fit_usage_counts(count_usage, ts, now, max_age)
  return count_usage and ts ~= nil and ts > 0 and now - ts <= max_age and ts - now <= FIT_FUTURE_TOLERANCE_MS
end
local function fit_has_room(cap, alloc, used, per)
  local taken = alloc
  if used > taken then taken = used end
  return per <= cap - taken
end
local function fit_entry_peak(e)
  local per = tonumber(e.per_gpu) or 0
  local peak = tonumber(e.peak_per_gpu) or 0
  if peak < per then peak = per end
  local cover = 0
  if e.victim == true then cover = per end
  return peak, cover
end
local function fit_peak_ok(cap, p, v, ratio)
  return p <= cap or (p - cap <= v and p <= math.floor(ratio * cap))
end
