-- BeginRebuild. KEYS: 1 sealed, 2 rebuilding, 3 epoch, 4 changes. ARGV: 1
-- who. Returns as ReadSeal. The token is "<ms>:<who> run=<run_id>": a rebuild
-- begun on another server process (a store restarted from a snapshot taken
-- during a rebuild) is begun anew here, so its quiet period runs here.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local here = store_process()
if sealed_here(KEYS[1], KEYS[3], KEYS[4], 0, here) then return {1, '', now} end
local r = redis.call('GET', KEYS[2])
if not written_here(r, here) then
  r = string.format('%d', now) .. ':' .. ARGV[1] .. ' run=' .. here
  redis.call('SET', KEYS[2], r)
end
return {0, r, now}
