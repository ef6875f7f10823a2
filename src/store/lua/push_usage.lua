-- PushReport (a node agent's usage report). KEYS: 1 nodes, 2 used, 3 epoch,
-- 4 changes, 5 cap, 6 reported. ARGV: 1 node, 2 in_cluster ('1': a node not
-- in the ledger is accepted), 3 the report's GPUs for P:reported
-- ('<idx>=<total>=<uuid>,...'; '' for an old report, which leaves it alone),
-- 4 k = how many GPU indices follow, 5..4+k the GPU indices, then
-- field/value pairs of the used hash (ts excluded; lua's unpack is bounded,
-- so they are written in chunks).
-- Returns {'ok'}, {'no_node'} (not in the ledger and not in_cluster) or
-- {'no_gpu', idx} (the node's capacity lacks GPU idx). Every check runs
-- before the first write: a refusal changes nothing. The report replaces the
-- previous one. For a node not in the ledger only P:reported is written (no
-- epoch move). The epoch's notification is tagged as usage only (bump_tag,
-- lua/bump.lua).
local member = redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 1
if not member and ARGV[2] ~= '1' then return {'no_node'} end
local k = tonumber(ARGV[4])
if member and k > 0 then
  local caps = redis.call('HMGET', KEYS[5], unpack(ARGV, 5, 4 + k))
  for i = 1, k do
    if not caps[i] then return {'no_gpu', ARGV[4 + i]} end
  end
end
if ARGV[3] ~= '' and redis.call('HGET', KEYS[6], ARGV[1]) ~= ARGV[3] then
  redis.call('HSET', KEYS[6], ARGV[1], ARGV[3])
end
-- A node not in the ledger keeps only its totals (node sync reads them); its
-- next report, once the node is in, fills the usage hash.
if not member then return {'ok'} end
local t = redis.call('TIME')
local nowtext = string.format('%d', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
redis.call('DEL', KEYS[2])
local first = 5 + k
local chunk = 2000  -- arguments per HSET (an even number)
if #ARGV < first then
  redis.call('HSET', KEYS[2], 'ts', nowtext)
end
for i = first, #ARGV, chunk do
  local last = math.min(i + chunk - 1, #ARGV)
  if i == first then
    redis.call('HSET', KEYS[2], 'ts', nowtext, unpack(ARGV, i, last))
  else
    redis.call('HSET', KEYS[2], unpack(ARGV, i, last))
  end
end
bump_tag = 'u'  -- usage only: replicas refresh for it at a bounded rate
member_prefix = '{u}'  -- and re-read only this node's capacity and usage
bump(KEYS[3], KEYS[4], ARGV[1])
return {'ok'}
