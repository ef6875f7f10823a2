-- Take or renew a lease (leader election).
-- KEYS: 1 lease
-- ARGV: 1 identity, 2 ttl_ms
-- Returns 1 when `identity` holds the lease now (taken or renewed), else 0.
-- Guarantees: at most one holder at a time; a holder's renewal resets the
-- TTL; another identity takes it only once it is free (released or lapsed).
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if not v then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0
