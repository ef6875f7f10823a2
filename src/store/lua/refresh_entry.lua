-- RefreshEntry (issue 32): reconcile writes the pod's current facts
-- (priority, class, victim flag, idle TTL, owner, gang) into an entry that
-- recorded others (or none: written before vramd recorded them). KEYS: 1
-- alloc, 2 epoch, 3 changes. ARGV: 1 uid, 2 the new entry JSON, 3 node, then
-- what the entry must still hold for the write to happen: 4 state, 5 per_gpu,
-- 6 gpus ('0,1'), 7 created_ms, 8 last_active_ms (0: none).
-- Returns 1 refreshed, 0 the entry changed since reconcile read it (released,
-- re-placed, its state or activity moved: nothing written, the next pass
-- decides again), -2 the entry is not readable JSON.
local raw = redis.call('HGET', KEYS[1], ARGV[1])
if not raw then return 0 end
local ok, e = pcall(cjson.decode, raw)
if not ok or type(e) ~= 'table' then return -2 end
local gpus = {}
if type(e.gpus) == 'table' then
  for i = 1, #e.gpus do gpus[i] = string.format('%d', e.gpus[i]) end
end
local function num(v)
  if type(v) ~= 'number' then return '0' end
  return string.format('%d', v)
end
if e.state ~= ARGV[4] or num(e.per_gpu) ~= ARGV[5] or table.concat(gpus, ',') ~= ARGV[6] or
    num(e.created_ms) ~= ARGV[7] or num(e.last_active_ms) ~= ARGV[8] then
  return 0
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
bump(KEYS[2], KEYS[3], ARGV[3])
return 1
