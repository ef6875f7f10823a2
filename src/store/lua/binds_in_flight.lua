-- BindsInFlight: the uids whose bind mark has not expired (server time);
-- expired marks are removed. KEYS: 1 inflight. Returns the live uids.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local all = redis.call('HGETALL', KEYS[1])
local live = {}
for i = 1, #all, 2 do
  local exp = tonumber(all[i + 1])
  if exp and exp > now then live[#live + 1] = all[i] else redis.call('HDEL', KEYS[1], all[i]) end
end
return live
