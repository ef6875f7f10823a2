-- Reap a GPU lock's owners whose pod is gone.
-- KEYS: 1 holder, 2 last, 3 queue, 4 queue_exp
-- ARGV: 1 holder owner to free ('' for none), 2.. waiters to remove
-- Returns {freed (0/1), waiters removed}
-- Guarantees: the lock is freed only if ARGV[1] still holds it (a new
-- holder granted since the caller looked is untouched); its grant record
-- goes only if it names that owner. The fence is kept.
local freed = 0
if ARGV[1] ~= '' and redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  if redis.call('HGET', KEYS[2], 'owner') == ARGV[1] then redis.call('DEL', KEYS[2]) end
  freed = 1
end
local removed = 0
for i = 2, #ARGV do
  removed = removed + redis.call('ZREM', KEYS[3], ARGV[i])
  redis.call('ZREM', KEYS[4], ARGV[i])
end
return {freed, removed}
