-- FinishBind: SetEntryState(bound) and EndBind in one call. KEYS: 1 alloc,
-- 2 epoch, 3 changes, 4 inflight, 5 cap, 6 used, 7 models (the node's other
-- hashes). ARGV as SetEntryState ('bound'). Returns what SetEntryState
-- returns, except a change: {1, epoch, cap, alloc, used, models} (the new
-- epoch as '%d' and the node's four hashes after the write, HGETALL
-- replies), so that the caller's cache takes this write from the answer
-- instead of reading the node again.
redis.call('HDEL', KEYS[4], ARGV[1])
local changed, epoch = set_state(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2], ARGV[3])
if changed ~= 1 then return changed end
return {1, string.format('%d', epoch), redis.call('HGETALL', KEYS[5]), redis.call('HGETALL', KEYS[1]),
        redis.call('HGETALL', KEYS[6]), redis.call('HGETALL', KEYS[7])}
