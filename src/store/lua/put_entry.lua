-- PutEntry. KEYS: 1 nodes, 2 alloc, 3 models, 4 pods, 5 epoch, 6 changes.
-- ARGV: 1 prefix, 2 node, 3 uid, 4 entry JSON, 5 append server time as
-- created_ms (1/0), 6 model. An entry of the pod on another node is removed.
local t = redis.call('TIME')
local nowtext = string.format('%d', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
local v = ARGV[4]
if ARGV[5] == '1' then v = v .. nowtext .. '}' end
local other = redis.call('HGET', KEYS[4], ARGV[3])
if other and other ~= ARGV[2] then
  redis.call('HDEL', ARGV[1] .. ':{' .. other .. '}:alloc', ARGV[3])
else
  other = nil
end
redis.call('HSET', KEYS[2], ARGV[3], v)
redis.call('HSET', KEYS[4], ARGV[3], ARGV[2])
redis.call('SADD', KEYS[1], ARGV[2])
if ARGV[6] ~= '' then redis.call('HSET', KEYS[3], ARGV[6], nowtext) end
bump(KEYS[5], KEYS[6], ARGV[2], other)
return 1
