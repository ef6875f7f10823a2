-- Acquire a GPU lock (run after lock_now.lua).
-- KEYS: 1 holder, 2 fence, 3 queue, 4 queue_exp, 5 last, 6 the node's activity hash
-- ARGV: 1 owner, 2 ttl_ms, 3 max_queue, 4 may_join ('0' on the retries of a
--       waiting call: a caller no longer queued, because it released or was
--       reaped meanwhile, is not queued again)
-- Returns {'held'|'granted', token, expired (0/1), waited_ms}
--       | {'queued', position} | {'full'} | {'gone'}
-- Guarantees: the lock is granted iff it is free and the queue is empty or
-- the caller is its head once waiters past their deadline are pruned; every
-- grant increments the fence (never reset), so tokens strictly increase. A
-- holder re-acquiring keeps its token (TTL reset). A queued caller keeps its
-- place and its deadline moves to now + ttl; arrivals are unique and
-- increasing (FIFO). The queue keys expire 1 s after the last deadline.
-- A held, granted or queued answer stamps the owner's pod as active now.
local owner, ttl = ARGV[1], tonumber(ARGV[2])
local cur = redis.call('GET', KEYS[1])
if cur == owner then
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('HSET', KEYS[5], 'ttl_ms', ttl)
  stamp_active(KEYS[6], owner)
  return {'held', tonumber(redis.call('GET', KEYS[2]) or '0'), 0, 0}
end
local dead = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now)
if #dead > 0 then
  redis.call('ZREM', KEYS[3], unpack(dead))
  redis.call('ZREM', KEYS[4], unpack(dead))
end
if ARGV[4] == '0' and not redis.call('ZSCORE', KEYS[3], owner) then return {'gone'} end
if not cur then
  local head = redis.call('ZRANGE', KEYS[3], 0, 0, 'WITHSCORES')
  if #head == 0 or head[1] == owner then
    local waited = 0
    if #head > 0 then
      waited = math.max(0, now - math.floor(tonumber(head[2]) / 1000))
      redis.call('ZREM', KEYS[3], owner)
      redis.call('ZREM', KEYS[4], owner)
    end
    local expired = redis.call('EXISTS', KEYS[5])
    redis.call('SET', KEYS[1], owner, 'PX', ttl)
    local token = redis.call('INCR', KEYS[2])
    redis.call('DEL', KEYS[5])
    redis.call('HSET', KEYS[5], 'owner', owner, 'token', token, 'ttl_ms', ttl, 'granted_ms', now)
    stamp_active(KEYS[6], owner)
    return {'granted', token, expired, waited}
  end
end
if not redis.call('ZSCORE', KEYS[3], owner) then
  if redis.call('ZCARD', KEYS[3]) >= tonumber(ARGV[3]) then return {'full'} end
  local arrival = now * 1000
  local tail = redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')
  if #tail > 0 and tonumber(tail[2]) >= arrival then arrival = tonumber(tail[2]) + 1 end
  redis.call('ZADD', KEYS[3], arrival, owner)
end
redis.call('ZADD', KEYS[4], now + ttl, owner)
local last = tonumber(redis.call('ZRANGE', KEYS[4], -1, -1, 'WITHSCORES')[2])
redis.call('PEXPIREAT', KEYS[3], last + 1000)
redis.call('PEXPIREAT', KEYS[4], last + 1000)
stamp_active(KEYS[6], owner)
return {'queued', redis.call('ZRANK', KEYS[3], owner) + 1}
