-- SetCapacity. KEYS: 1 nodes, 2 cap, 3 epoch, 4 changes. ARGV: 1 node, then
-- field/value pairs. Returns 0 when nothing changed (no write, no epoch
-- bump), else 1.
local cur = redis.call('HGETALL', KEYS[2])
local same = redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 1 and #cur == #ARGV - 1
if same then
  local m = {}
  for i = 1, #cur, 2 do m[cur[i]] = cur[i + 1] end
  for i = 2, #ARGV, 2 do
    if m[ARGV[i]] ~= ARGV[i + 1] then same = false; break end
  end
end
if same then return 0 end
redis.call('DEL', KEYS[2])
if #ARGV > 1 then redis.call('HSET', KEYS[2], unpack(ARGV, 2)) end
redis.call('SADD', KEYS[1], ARGV[1])
bump(KEYS[3], KEYS[4], ARGV[1])
return 1
