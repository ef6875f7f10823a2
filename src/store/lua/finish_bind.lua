-- FinishBind: SetEntryState(bound) and EndBind in one call. KEYS: 1 alloc,
-- 2 epoch, 3 changes, 4 inflight. ARGV as SetEntryState ('bound'). Returns
-- what SetEntryState returns, except a change: {1, epoch} (the new epoch as
-- '%d'). set_state rewrites the entry's state and nothing else, so the
-- caller's cache takes this write from its own copy of the node
-- (SnapshotCache::ApplyOwnState) instead of reading the node again.
redis.call('HDEL', KEYS[4], ARGV[1])
local changed, epoch = set_state(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2], ARGV[3])
if changed ~= 1 then return changed end
return {1, string.format('%d', epoch)}
