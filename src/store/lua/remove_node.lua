-- RemoveNode. KEYS: 1 nodes, 2 cap, 3 alloc, 4 used, 5 models, 6 pods,
-- 7 epoch, 8 changes, 9 reported, 10 roomfor (pending holds, hold_fn.lua). ARGV: 1 node,
-- 2 prefix. Returns how many ledger keys/members were removed. The node
-- stays in the change log: a reader finds it gone from P:nodes and drops it.
-- The GPU locks of the node's GPUs (valkey_lock_store.cc) go with it (issue
-- 33: nothing of a departed node stays for ever): holder, queue and last
-- grant, and the node's lock activity; each fence counter expires after 7
-- days (a holder that outlived the node still holds an older token than any
-- grant of a node of that name back within the week).
for _, uid in ipairs(redis.call('HKEYS', KEYS[3])) do
  if redis.call('HGET', KEYS[6], uid) == ARGV[1] then redis.call('HDEL', KEYS[6], uid) end
end
if ARGV[2] then
  for _, idx in ipairs(redis.call('HKEYS', KEYS[2])) do
    local base = ARGV[2] .. ':lock:gpu:{' .. ARGV[1] .. '}:' .. idx
    redis.call('DEL', base, base .. ':queue', base .. ':queue:exp', base .. ':last')
    redis.call('PEXPIRE', base .. ':fence', 7 * 86400000)
  end
  redis.call('DEL', ARGV[2] .. ':{' .. ARGV[1] .. '}:active')
end
local n = redis.call('DEL', KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[10]) + redis.call('SREM', KEYS[1], ARGV[1]) +
  redis.call('HDEL', KEYS[9], ARGV[1])
if n > 0 then bump(KEYS[7], KEYS[8], ARGV[1]) end
return n
