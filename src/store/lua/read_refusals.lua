-- Read the filter refusals recorded within a maximum age.
-- KEYS: 1 P:refused, 2 P:refused:ts (record_refusals.lua)
-- ARGV: 1 max_age_ms
-- Returns {now (server ms), uid, text, uid, text, ...}
-- Guarantees: refusals stamped before now - max_age_ms are deleted first.
-- (Fields of the hash that the zset does not list are returned as they are:
-- the caller checks each text's own time.)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local cutoff = now - tonumber(ARGV[1])
while true do
  local old = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', '(' .. string.format('%d', cutoff), 'LIMIT', 0, 1000)
  if #old == 0 then break end
  redis.call('HDEL', KEYS[1], unpack(old))
  redis.call('ZREM', KEYS[2], unpack(old))
end
local out = redis.call('HGETALL', KEYS[1])
table.insert(out, 1, now)
return out
