-- ReadSeal. KEYS: 1 sealed, 2 rebuilding, 3 epoch, 4 changes. ARGV: 1 the
-- highest epoch the caller has seen. Returns {sealed 1/0, rebuilding or '',
-- server ms}; unseals first when the epoch went back.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local floor = tonumber(ARGV[1]) or 0
if (tonumber(redis.call('GET', KEYS[3]) or '0') or 0) < floor then unseal(KEYS[1], KEYS[3], KEYS[4], floor) end
return {redis.call('EXISTS', KEYS[1]), redis.call('GET', KEYS[2]) or '', now}
