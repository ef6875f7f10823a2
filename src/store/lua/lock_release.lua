-- Release a GPU lock or leave its queue (run after lock_now.lua and
-- lock_not_owner.lua).
-- KEYS: 1 holder, 2 last, 3 queue, 4 queue_exp, 5 the node's activity hash
-- ARGV: 1 owner
-- Returns {'released'|'left_queue'|'other'|'expired'|'free', 0, 0}
-- Guarantees: only the holder frees the lock (the grant record goes with
-- it, so a free lock with a record means its holder expired); the fence is
-- kept. A release does not hand the lock over: the queue head takes it on
-- its next acquire. A release or a waiter leaving stamps its pod active now.
local cur = redis.call('GET', KEYS[1])
if cur == ARGV[1] then
  redis.call('DEL', KEYS[1], KEYS[2])
  stamp_active(KEYS[5], ARGV[1])
  return {'released', 0, 0}
end
redis.call('ZREM', KEYS[4], ARGV[1])
if redis.call('ZREM', KEYS[3], ARGV[1]) == 1 then
  stamp_active(KEYS[5], ARGV[1])
  return {'left_queue', 0, 0}
end
return not_owner(cur, KEYS[2], ARGV[1])
