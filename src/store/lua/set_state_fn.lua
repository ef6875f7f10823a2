-- SetEntryState. KEYS: 1 alloc, 2 epoch, 3 changes. ARGV: 1 uid, 2 state,
-- 3 node. Returns -1 no entry, -2 unreadable entry, 0 unchanged, 1 changed
-- (and then the new epoch as a second value).
local function set_state(alloc_key, epoch_key, changes_key, uid, state, node)
  local raw = redis.call('HGET', alloc_key, uid)
  if not raw then return -1 end
  if string.match(raw, '"state"%s*:%s*"([^"]*)"') == state then return 0 end
  local v, n = string.gsub(raw, '("state"%s*:%s*")[^"]*"', '%1' .. state .. '"', 1)
  if n == 0 then
    local ok, e = pcall(cjson.decode, raw)
    if not ok or type(e) ~= 'table' then return -2 end
    e.state = state
    v = cjson.encode(e)
  end
  redis.call('HSET', alloc_key, uid, v)
  local epoch = bump(epoch_key, changes_key, node)
  return 1, epoch
end
