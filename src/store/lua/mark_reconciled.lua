-- MarkReconciled: records the server time of the last full reconcile pass.
-- KEYS: 1 reconciled. Returns 1.
local t = redis.call('TIME')
redis.call('SET', KEYS[1], string.format('%d', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)))
return 1
