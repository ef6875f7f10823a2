-- RemoveNode. KEYS: 1 nodes, 2 cap, 3 alloc, 4 used, 5 models, 6 pods,
-- 7 epoch, 8 changes, 9 reported, 10 roomfor (pending holds, hold_fn.lua). ARGV: 1 node. Returns how many
-- keys/members were removed. The node stays in the change log: a reader
-- finds it gone from P:nodes and drops it.
for _, uid in ipairs(redis.call('HKEYS', KEYS[3])) do
  if redis.call('HGET', KEYS[6], uid) == ARGV[1] then redis.call('HDEL', KEYS[6], uid) end
end
local n = redis.call('DEL', KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[10]) + redis.call('SREM', KEYS[1], ARGV[1]) +
  redis.call('HDEL', KEYS[9], ARGV[1])
if n > 0 then bump(KEYS[7], KEYS[8], ARGV[1]) end
return n
