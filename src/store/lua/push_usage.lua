-- PushUsage. KEYS: 1 nodes, 2 used, 3 epoch, 4 changes. ARGV: 1 node, then
-- gpu/bytes pairs. The report replaces the previous one. Returns -1 for an
-- unknown node.
if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 0 then return -1 end
local t = redis.call('TIME')
local nowtext = string.format('%d', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
redis.call('DEL', KEYS[2])
redis.call('HSET', KEYS[2], 'ts', nowtext, unpack(ARGV, 2))
bump(KEYS[3], KEYS[4], ARGV[1])
return 1
