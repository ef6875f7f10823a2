-- FinishBinds: the end of several successful binds in one call (the bound
-- marker's batch, extender/bound_marker.h). KEYS: 1 epoch, 2 changes,
-- 3 inflight, then for each pod the alloc hash of its node. ARGV: two per
-- pod, its uid and its node. For each pod, in order: its in-flight mark is
-- cleared, and its entry becomes 'bound' (set_state: the epoch moves by one
-- per entry changed): a 'reserved' one, or the 'hold' the pod was bound into
-- (a bind into room held for its pod reserves nothing: the hold is its
-- reservation). A 'terminating' entry stays so: a mark written late never
-- moves back an entry that reconcile moved on meanwhile. Returns two values
-- per pod: its code as set_state's (1 changed, 0 unchanged: bound already or
-- terminating, -1 no entry, -2 unreadable entry) and, after a change, the
-- new epoch as '%d' (else '').
local out = {}
for i = 1, #ARGV / 2 do
  local uid, node, alloc = ARGV[2 * i - 1], ARGV[2 * i], KEYS[3 + i]
  redis.call('HDEL', KEYS[3], uid)
  local code, epoch = -1, ''
  local raw = redis.call('HGET', alloc, uid)
  if raw then
    local state = string.match(raw, '"state"%s*:%s*"([^"]*)"')
    if state ~= 'terminating' then
      local changed, e = set_state(alloc, KEYS[1], KEYS[2], uid, 'bound', node)
      code = changed
      if changed == 1 then epoch = string.format('%d', e) end
    else
      code = 0
    end
  end
  out[#out + 1] = code
  out[#out + 1] = epoch
end
return out
