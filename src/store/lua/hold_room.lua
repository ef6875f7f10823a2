-- HoldRoom (issue 32). Needs the preludes bump.lua and hold_fn.lua.
-- KEYS: 1 nodes, 2 alloc, 3 pods, 4 epoch, 5 changes, 6 roomfor (of the node),
--       7 holdwait (holder uid -> until when, ms: room being made for it).
-- ARGV: 1 prefix, 2 node, 3 holder uid, 4 the hold's entry JSON up to and
--       including "created_ms": (state 'hold'), 5 ttl ms, 6.. the victims'
--       uids (evicted on this node for the holder).
-- Victims whose entries are still on the node (terminating: the phantom rule
-- keeps their VRAM) get the pending hold (hold_fn.lua); once none is left
-- the hold is written at once.
-- Returns 2 pending (waits for the victims' release) | 1 written | 0 the
-- holder holds an entry that is not a hold (nothing written) | -1 no node.
if redis.call('SISMEMBER', KEYS[1], ARGV[2]) == 0 then return -1 end
local other = redis.call('HGET', KEYS[3], ARGV[3])
if other then
  local raw = redis.call('HGET', ARGV[1] .. ':{' .. other .. '}:alloc', ARGV[3])
  if raw then
    local ok, e = pcall(cjson.decode, raw)
    if not (ok and type(e) == 'table' and e.state == 'hold') then return 0 end
  end
end
local rec = ARGV[3] .. '\n' .. ARGV[5] .. '\n' .. ARGV[4]
local waiting = 0
for i = 6, #ARGV do
  if redis.call('HEXISTS', KEYS[2], ARGV[i]) == 1 then
    redis.call('HSET', KEYS[6], ARGV[i], rec)
    waiting = waiting + 1
  end
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if waiting > 0 then
  -- Released victims take their record with them (release.lua); a day bounds
  -- what a victim that never ends leaves behind.
  redis.call('PEXPIRE', KEYS[6], 86400000)
  -- The preempt verb asks here whether room is being made for the holder
  -- (HoldPending): until the hold is written, or for its ttl at most.
  redis.call('HSET', KEYS[7], ARGV[3], string.format('%d', now + tonumber(ARGV[5])))
  return 2
end
redis.call('HDEL', KEYS[7], ARGV[3])
local w, o = write_hold(ARGV[1], ARGV[2], KEYS[2], KEYS[3], ARGV[3], tonumber(ARGV[5]), ARGV[4], now)
if w == 1 then bump(KEYS[4], KEYS[5], ARGV[2], o) end
return w
