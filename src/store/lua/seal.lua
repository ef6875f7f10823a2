-- Seal. KEYS: 1 sealed, 2 rebuilding, 3 epoch, 4 changes. ARGV: 1 prefix,
-- 2 rebuild token, 3.. node, pod uid pairs that must hold an entry. Returns
-- {'sealed'} | {'token'} (another rebuild began: the store was lost again)
-- | {'missing', count, node, uid} (the first one missing). Checking the
-- entries and sealing are one atomic step: a loss in between cannot leave a
-- seal on an incomplete ledger. The seal is "<ms>:<token>"; the token ends
-- with ' run=<run_id>' of the process the rebuild began on, which must be
-- this one (sealed_here): a store restarted meanwhile restarts the rebuild.
local here = store_process()
if sealed_here(KEYS[1], KEYS[3], KEYS[4], 0, here) then return {'sealed'} end
if redis.call('GET', KEYS[2]) ~= ARGV[2] or not written_here(ARGV[2], here) then return {'token'} end
local missing, mnode, muid = 0, '', ''
for i = 3, #ARGV - 1, 2 do
  if redis.call('HEXISTS', ARGV[1] .. ':{' .. ARGV[i] .. '}:alloc', ARGV[i + 1]) == 0 then
    if missing == 0 then mnode, muid = ARGV[i], ARGV[i + 1] end
    missing = missing + 1
  end
end
if missing > 0 then return {'missing', missing, mnode, muid} end
local t = redis.call('TIME')
redis.call('SET', KEYS[1], string.format('%d', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)) .. ':' .. ARGV[2])
redis.call('DEL', KEYS[2])
redis.call('DEL', unsealed_key(KEYS[1]))
bump(KEYS[3], KEYS[4])
return {'sealed'}
