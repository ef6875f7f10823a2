-- BeginBind: marks a bind in flight so reconcile never frees its reservation
-- meanwhile. KEYS: 1 inflight. ARGV: 1 uid, 2 ttl ms. P:inflight is a hash
-- uid -> expiry (server ms). Returns 1.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSET', KEYS[1], ARGV[1], string.format('%d', now + tonumber(ARGV[2])))
return 1
