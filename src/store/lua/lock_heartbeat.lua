-- Heartbeat of a GPU lock (run after lock_now.lua and lock_not_owner.lua).
-- KEYS: 1 holder, 2 fence, 3 last, 4 the node's activity hash
-- ARGV: 1 owner, 2 ttl_ms (0: the grant's TTL), 3 default ttl_ms (when the
--       grant recorded none)
-- Returns {'ok', token, ttl_ms} | {'other'|'expired'|'free', 0, 0}
-- Guarantees: only the holder's TTL is reset; a new ttl_ms becomes the
-- grant's TTL for later heartbeats. Nothing changes for anyone else (but a
-- lapsed grant of the caller is reported once, see not_owner). The holder's
-- pod is stamped active now.
local cur = redis.call('GET', KEYS[1])
if cur == ARGV[1] then
  local ttl = tonumber(ARGV[2])
  if ttl <= 0 then
    ttl = tonumber(redis.call('HGET', KEYS[3], 'ttl_ms') or ARGV[3])
  else
    redis.call('HSET', KEYS[3], 'ttl_ms', ttl)
  end
  redis.call('PEXPIRE', KEYS[1], ttl)
  stamp_active(KEYS[4], ARGV[1])
  return {'ok', tonumber(redis.call('GET', KEYS[2]) or '0'), ttl}
end
return not_owner(cur, KEYS[3], ARGV[1])
