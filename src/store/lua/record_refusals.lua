-- Record filter refusals (store::Refusal), one per pod UID.
-- KEYS: 1 P:refused (hash uid -> JSON), 2 P:refused:ts (zset uid -> server ms)
-- ARGV: 1 max refusals kept, then pairs: uid, the JSON text after its
--       leading {"ts_ms":N, (refusal_codec.h)
-- Returns the server's time (ms).
-- Guarantees: each uid's refusal is replaced whole and stamped now; then the
-- oldest beyond the maximum are deleted (both keys).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local prefix = '{"ts_ms":' .. string.format('%d', now) .. ','
for i = 2, #ARGV - 1, 2 do
  redis.call('HSET', KEYS[1], ARGV[i], prefix .. ARGV[i + 1])
  redis.call('ZADD', KEYS[2], now, ARGV[i])
end
local excess = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[1])
while excess > 0 do
  local old = redis.call('ZRANGE', KEYS[2], 0, math.min(excess, 1000) - 1)
  redis.call('HDEL', KEYS[1], unpack(old))
  redis.call('ZREM', KEYS[2], unpack(old))
  excess = excess - #old
end
return now
