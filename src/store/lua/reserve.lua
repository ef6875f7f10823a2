-- Reserve. Needs the preludes bump.lua and fit.lua (the fit rule).
-- KEYS: 1 nodes, 2 cap, 3 alloc, 4 used, 5 models, 6 pods, 7 epoch, 8 changes,
--       9 inflight, 10 sealed
-- ARGV: 1 prefix, 2 node, 3 uid, 4 entry JSON up to and including
--       "created_ms":, 5 per_gpu, 6-7 the fit policy (ledger::FitPolicy):
--       6 count usage (1/0), 7 usage max age ms,
--       8 model, 9 in-flight ttl ms (0: no mark), 10 require the seal (1/0),
--       11 highest epoch the caller has seen, 12 the demand's peak per GPU
--       (max(per_gpu, peak_per_gpu)), 13 its victim cover (per_gpu for a
--       designated victim, else 0), 14 max peak ratio (FitPolicy), 15 the
--       pod's priority, 16.. gpu indices
-- The entry is written only when per_gpu fits each named GPU under the fit
-- rule (fit_has_room, with U from the node's usage report when
-- fit_usage_counts, else U = A) and the peak rule holds on each once the
-- demand is added (fit_peak_ok, P and V summed from the node's entries by
-- fit_entry_peak).
-- Returns {'reserved', epoch, now, taken, v, ts}: the new epoch and the
--         server time written as the entry's created_ms and the model's
--         time (both '%d'), the uids of the holds taken (below), and the
--         usage hash's "v" and "ts" ('' when absent). With them the caller's
--         cache takes the write from its own copy of the node (store/
--         snapshot_cache.h, ApplyOwnEntry): the entry it sent, the holds and
--         the model, and whether the usage report's per-pod figures apply to
--         the new entry, without this answer carrying the node's hashes.
--       | {'moved', from} | {'held'} | {'conflict', node, state}
--         ('held': the pod holds an entry here already, not a hold; a hold
--         of the pod, here or on another node, is replaced: 'reserved' or
--         'moved')
--       | {'no_node'} | {'no_gpu', idx} | {'bad_cap', idx, raw}
--       | {'insufficient', {{idx, cap, alloc, used, used_known}, ...}}: the
--         GPUs without room and their vectors as the rule saw them (used = A
--         unless used_known); the caller words the reason (ledger's)
--       | {'peak', {{idx, cap, P, V}, ...}}: every GPU had room, these break
--         the peak rule with the demand added (P, V include it)
--       | {'rebuilding', why}
-- With the seal required nothing is granted (not even an entry already held)
-- while the ledger is unsealed: entries of bound pods may be missing.
-- Holds of pods of lower priority (ledger::MayTakeHold) on the named GPUs
-- count like any entry; when the demand fits only without them, they are
-- taken: removed in the same step as the reservation is written (their pods
-- wait again), and 'reserved' carries their uids.
local node, uid = ARGV[2], ARGV[3]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if ARGV[10] == '1' then
  if redis.call('EXISTS', KEYS[10]) == 0 then return {'rebuilding', 'unsealed'} end
  local floor = tonumber(ARGV[11]) or 0
  if (tonumber(redis.call('GET', KEYS[7]) or '0') or 0) < floor then
    unseal(KEYS[10], KEYS[7], KEYS[8], floor, 'epoch')
    return {'rebuilding', 'epoch went back'}
  end
  if not sealed_here(KEYS[10], KEYS[7], KEYS[8], floor, store_process()) then
    return {'rebuilding', 'sealed by another store process'}
  end
end
local function mark_in_flight()
  local ttl = tonumber(ARGV[9]) or 0
  if ttl > 0 then redis.call('HSET', KEYS[9], uid, string.format('%d', now + ttl)) end
end
-- A hold of this pod (state 'hold', issue 32) is room an eviction made for
-- it: not counted against it here, replaced by the reservation; one on
-- another node is removed as a reservation there would be (moved).
local own_hold = nil
local mine = redis.call('HGET', KEYS[3], uid)
if mine then
  local ok, e = pcall(cjson.decode, mine)
  if ok and type(e) == 'table' and e.state == 'hold' and type(e.gpus) == 'table' then
    own_hold = e
  else
    -- Rewritten so that a WAIT after this answer also covers the entry (an
    -- earlier attempt may have written it without replicas acknowledging).
    redis.call('HSET', KEYS[6], uid, node)
    mark_in_flight()
    return {'held'}
  end
end
local moved_from, other = false, redis.call('HGET', KEYS[6], uid)
if other and other ~= node then
  local okey = ARGV[1] .. ':{' .. other .. '}:alloc'
  local raw = redis.call('HGET', okey, uid)
  if raw then
    local ok, e = pcall(cjson.decode, raw)
    local st = 'unreadable'
    if ok and type(e) == 'table' and type(e.state) == 'string' then st = e.state end
    if st ~= 'reserved' and st ~= 'hold' then return {'conflict', other, st} end
    moved_from = okey
  end
end
if redis.call('SISMEMBER', KEYS[1], node) == 0 then return {'no_node'} end
local per = tonumber(ARGV[5])
local priority = tonumber(ARGV[15]) or 0
local wanted = {}
for i = 16, #ARGV do wanted[tonumber(ARGV[i]) or -1] = true end
local alloc, peak, cover = {}, {}, {}
-- What the takeable holds (lower priority, on a wanted GPU) add, apart.
local talloc, tpeak, tcover, takeable = {}, {}, {}, false
for _, v in ipairs(redis.call('HVALS', KEYS[3])) do
  local ok, e = pcall(cjson.decode, v)
  if ok and type(e) == 'table' and type(e.gpus) == 'table' then
    local p = tonumber(e.per_gpu) or 0
    local ep, ec = fit_entry_peak(e)
    local take = false
    if e.state == 'hold' and (tonumber(e.priority) or 0) < priority then
      for _, g in ipairs(e.gpus) do
        if wanted[tonumber(g) or -2] then take = true end
      end
    end
    takeable = takeable or take
    for _, g in ipairs(e.gpus) do
      local gi = tonumber(g)
      if gi then
        alloc[gi] = (alloc[gi] or 0) + p
        peak[gi] = (peak[gi] or 0) + ep
        cover[gi] = (cover[gi] or 0) + ec
        if take then
          talloc[gi] = (talloc[gi] or 0) + p
          tpeak[gi] = (tpeak[gi] or 0) + ep
          tcover[gi] = (tcover[gi] or 0) + ec
        end
      end
    end
  end
end
if own_hold then
  local p = tonumber(own_hold.per_gpu) or 0
  local ep, ec = fit_entry_peak(own_hold)
  for _, g in ipairs(own_hold.gpus) do
    local gi = tonumber(g)
    if gi then
      alloc[gi] = (alloc[gi] or 0) - p
      peak[gi] = (peak[gi] or 0) - ep
      cover[gi] = (cover[gi] or 0) - ec
    end
  end
end
local dpeak, dcover = tonumber(ARGV[12]) or per, tonumber(ARGV[13]) or 0
local ratio = tonumber(ARGV[14]) or 1
local fresh = fit_usage_counts(ARGV[6] == '1', tonumber(redis.call('HGET', KEYS[4], 'ts')), now,
                               tonumber(ARGV[7]) or 0)
-- The fit of every wanted GPU, with the takeable holds counted (taking
-- false) or not (true). A GPU's usage drops by a hold's figure too when
-- the hold is taken: a hold's room is free (its victims are gone), so the
-- agent's U never includes it.
local function check(taking)
  local fails, pfails = {}, {}
  for i = 16, #ARGV do
    local c = redis.call('HGET', KEYS[2], ARGV[i])
    if not c then return {'no_gpu', ARGV[i]} end
    local cap = tonumber(c)
    if not cap then return {'bad_cap', ARGV[i], c} end
    local gi = tonumber(ARGV[i])
    local a = alloc[gi] or 0
    local pk, cv = peak[gi] or 0, cover[gi] or 0
    if taking then
      a = a - (talloc[gi] or 0)
      pk, cv = pk - (tpeak[gi] or 0), cv - (tcover[gi] or 0)
    end
    local u, known = a, 0
    if fresh then
      local uv = tonumber(redis.call('HGET', KEYS[4], ARGV[i]))
      if uv then u, known = uv, 1 end
    end
    if not fit_has_room(cap, a, u, per) then
      fails[#fails + 1] = {gi, cap, a, u, known}
    else
      local p, v = pk + dpeak, cv + dcover
      if not fit_peak_ok(cap, p, v, ratio) then pfails[#pfails + 1] = {gi, cap, p, v} end
    end
  end
  if #fails > 0 then return {'insufficient', fails} end
  if #pfails > 0 then return {'peak', pfails} end
  return nil
end
local refused = check(false)
local taken = {}
if refused and takeable and refused[1] ~= 'no_gpu' and refused[1] ~= 'bad_cap' and not check(true) then
  -- The room of lower-priority holds goes to this pod: those holds end.
  local all = redis.call('HGETALL', KEYS[3])
  for i = 1, #all, 2 do
    local ok, e = pcall(cjson.decode, all[i + 1])
    if ok and type(e) == 'table' and e.state == 'hold' and type(e.gpus) == 'table' and
       (tonumber(e.priority) or 0) < priority then
      local hit = false
      for _, g in ipairs(e.gpus) do
        if wanted[tonumber(g) or -2] then hit = true end
      end
      if hit then taken[#taken + 1] = all[i] end
    end
  end
  for _, h in ipairs(taken) do
    redis.call('HDEL', KEYS[3], h)
    if redis.call('HGET', KEYS[6], h) == node then redis.call('HDEL', KEYS[6], h) end
  end
  refused = nil
end
if refused then return refused end
if moved_from then redis.call('HDEL', moved_from, uid) end
local nowtext = string.format('%d', now)
redis.call('HSET', KEYS[3], uid, ARGV[4] .. nowtext .. '}')
redis.call('HSET', KEYS[6], uid, node)
if ARGV[8] ~= '' then redis.call('HSET', KEYS[5], ARGV[8], nowtext) end
mark_in_flight()
if moved_from then
  bump(KEYS[7], KEYS[8], node, other)
  return {'moved', other}
end
local epoch = bump(KEYS[7], KEYS[8], node)
local uv = redis.call('HMGET', KEYS[4], 'v', 'ts')
return {'reserved', string.format('%d', epoch), nowtext, taken, uv[1] or '', uv[2] or ''}
