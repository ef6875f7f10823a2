-- BudgetRecord (issue 32): one eviction made under the shared budget.
-- KEYS: 1 P:budget:recent, 2 P:budget:k:<key>. ARGV: 1 the key's cooldown ms
-- (0: none), 2 a unique action id. The cooldown is the key's expiry on the
-- server's clock; the action counts in the cluster's minute until 60 s pass.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local cooldown = tonumber(ARGV[1])
if cooldown > 0 then redis.call('SET', KEYS[2], '1', 'PX', cooldown) end
redis.call('ZADD', KEYS[1], now, ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%d', now - 60000))
redis.call('PEXPIRE', KEYS[1], 120000)
return 1
