-- Release. KEYS: 1 alloc, 2 pods, 3 epoch, 4 changes. ARGV: 1 uid, 2 node.
-- Returns 0/1.
local n = redis.call('HDEL', KEYS[1], ARGV[1])
if redis.call('HGET', KEYS[2], ARGV[1]) == ARGV[2] then redis.call('HDEL', KEYS[2], ARGV[1]) end
if n > 0 then bump(KEYS[3], KEYS[4], ARGV[2]) end
return n
