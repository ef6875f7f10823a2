-- BudgetAllowed (issue 32): whether one more eviction may happen now under
-- the budget every replica shares. KEYS: 1 P:budget:recent (zset: action id
-- -> server ms), 2 P:budget:k:<key> (set while the key's cooldown runs).
-- ARGV: 1 max actions in any 60 s over the cluster (<= 0: none).
-- Returns 1 allowed, 0 not (the key's cooldown runs, or the minute is full).
-- Actions older than 60 s leave the zset here and in budget_record.lua.
if tonumber(ARGV[1]) <= 0 then return 0 end
if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%d', now - 60000))
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then return 0 end
return 1
