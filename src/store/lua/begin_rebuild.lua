-- BeginRebuild. KEYS: 1 sealed, 2 rebuilding. ARGV: 1 who. Returns as ReadSeal.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if redis.call('EXISTS', KEYS[1]) == 1 then return {1, '', now} end
local r = redis.call('GET', KEYS[2])
if not r then
  r = string.format('%d', now) .. ':' .. ARGV[1]
  redis.call('SET', KEYS[2], r)
end
return {0, r, now}
