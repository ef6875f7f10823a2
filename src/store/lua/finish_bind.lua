-- FinishBind: SetEntryState(bound) and EndBind in one call. KEYS: 1 alloc,
-- 2 epoch, 3 changes, 4 inflight. ARGV as SetEntryState ('bound').
redis.call('HDEL', KEYS[4], ARGV[1])
return set_state(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2], ARGV[3])
