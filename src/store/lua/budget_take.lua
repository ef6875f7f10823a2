-- BudgetTake (issue 32): claims one action under the budget every replica
-- shares, before the action is made, so that a replica killed between its
-- eviction and any later write still leaves the cooldown behind.
-- KEYS: 1 P:budget:recent (zset: action id -> server ms), 2 P:budget:k:<key>
-- (the claim id, set while the key's cooldown runs), 3 P:leader (the leader
-- lease, lease_acquire.lua).
-- ARGV: 1 max actions in any 60 s over the cluster (<= 0: none), 2 the key's
-- cooldown ms (0: none), 3 a unique action id (the claim: "<identity>/<n>"),
-- 4 the claiming replica's identity ('' : no fence).
-- The fence, in the same step as the claim: a replica that does not hold the
-- leader lease in the store claims nothing (returns -1), however sure its
-- own view of the lease is; the claim records who made it.
-- Returns 1 taken (the cooldown runs, the action counts in the minute), 0 not
-- (the key's cooldown runs, or the minute is full), -1 not the leader:
-- nothing written.
if ARGV[4] ~= '' and redis.call('GET', KEYS[3]) ~= ARGV[4] then return -1 end
-- Actions older than 60 s leave the zset here and in budget_record.lua.
if tonumber(ARGV[1]) <= 0 then return 0 end
if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%d', now - 60000))
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then return 0 end
local cooldown = tonumber(ARGV[2])
if cooldown > 0 then redis.call('SET', KEYS[2], ARGV[3], 'PX', cooldown) end
redis.call('ZADD', KEYS[1], now, ARGV[3])
redis.call('PEXPIRE', KEYS[1], 120000)
return 1
