-- Holds (issue 32), a prelude of hold_room.lua and release.lua: room an
-- eviction made, held for the pending pod it was made for (an entry in
-- state 'hold', ledger::EntryState::kHold).
-- A pending hold waits in P:{node}:roomfor, one field per victim:
--   victim uid -> "<holder uid>\n<ttl ms>\n<the hold's entry JSON up to and
--   including "created_ms":>"
-- and becomes the hold when the last of its victims' entries on the node is
-- released (release.lua): the room is held from the moment it is free, so
-- the ledger is never over-committed by a hold and its time counts from then.
-- write_hold(prefix, node, alloc, pods, holder, ttl, json, now) writes the
-- hold into `alloc` (ending at now + ttl), replacing a hold of the holder on
-- another node. Nothing is written when the holder holds an entry that is
-- not a hold (bound or binding: the room is its own already).
-- Returns 1 and the other node whose hold it replaced (or nil) | 0.
local function write_hold(prefix, node, alloc, pods, holder, ttl, json, now)
  local other = redis.call('HGET', pods, holder)
  local okey = nil
  if other then
    okey = prefix .. ':{' .. other .. '}:alloc'
    local raw = redis.call('HGET', okey, holder)
    if raw then
      local ok, e = pcall(cjson.decode, raw)
      if not (ok and type(e) == 'table' and e.state == 'hold') then return 0, nil end
    end
  end
  if other and other ~= node then
    redis.call('HDEL', okey, holder)
  else
    other = nil
  end
  redis.call('HSET', alloc, holder, json .. string.format('%d', now) .. ',"hold_until_ms":' ..
             string.format('%d', now + ttl) .. '}')
  redis.call('HSET', pods, holder, node)
  return 1, other
end
-- The holder a pending-hold record names (nil when unreadable), its ttl and JSON.
local function hold_record(rec)
  local holder, ttl, json = string.match(rec, '^([^\n]+)\n(%d+)\n(.+)$')
  if not holder then return nil end
  return holder, tonumber(ttl), json
end
