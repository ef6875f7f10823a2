-- Give a lease up.
-- KEYS: 1 lease
-- ARGV: 1 identity
-- Returns 1 when `identity` held the lease and it is free now, else 0.
-- Guarantees: only the holder frees it (a lease taken over meanwhile is
-- left to its new holder).
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
