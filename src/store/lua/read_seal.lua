-- ReadSeal. KEYS: 1 sealed, 2 rebuilding, 3 epoch, 4 changes. ARGV: 1 the
-- highest epoch the caller has seen. Returns {sealed 1/0, rebuilding or '',
-- server ms}; unseals first when the epoch went back or the seal was made by
-- another server process (sealed_here), and reports a rebuild begun on
-- another server process as none (its quiet period did not run here).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local floor = tonumber(ARGV[1]) or 0
if (tonumber(redis.call('GET', KEYS[3]) or '0') or 0) < floor then unseal(KEYS[1], KEYS[3], KEYS[4], floor, 'epoch') end
local here = store_process()
local sealed = sealed_here(KEYS[1], KEYS[3], KEYS[4], floor, here)
local r = redis.call('GET', KEYS[2])
if r and not written_here(r, here) then r = nil end
return {sealed and 1 or 0, r or '', now}
