-- Release. Needs the preludes bump.lua and hold_fn.lua.
-- KEYS: 1 alloc, 2 pods, 3 epoch, 4 changes, 5 roomfor (of the node),
--       6 holdwait (hold_room.lua).
-- ARGV: 1 uid, 2 node, 3 '1': only a hold (state 'hold', ReleaseHold), so
-- that the reservation of a holder whose bind replaced its hold meanwhile is
-- never released; 4 prefix.
-- The released entry of a victim with a pending hold (hold_fn.lua) takes its
-- record along; when it was the last victim of that holder on the node, the
-- hold is written in the same step: the room goes from the victim to the
-- pod it was made for, never to anyone else in between.
-- Returns 0/1.
if ARGV[3] == '1' then
  local raw = redis.call('HGET', KEYS[1], ARGV[1])
  if not raw then return 0 end
  local ok, e = pcall(cjson.decode, raw)
  if not (ok and type(e) == 'table' and e.state == 'hold') then return 0 end
end
local n = redis.call('HDEL', KEYS[1], ARGV[1])
if redis.call('HGET', KEYS[2], ARGV[1]) == ARGV[2] then redis.call('HDEL', KEYS[2], ARGV[1]) end
local other = nil
local rec = redis.call('HGET', KEYS[5], ARGV[1])
if rec then
  redis.call('HDEL', KEYS[5], ARGV[1])
  local holder, ttl, json = hold_record(rec)
  if n > 0 and holder then
    local waiting = false
    for _, v in ipairs(redis.call('HVALS', KEYS[5])) do
      if string.sub(v, 1, #holder + 1) == holder .. '\n' then
        waiting = true
        break
      end
    end
    if not waiting then
      redis.call('HDEL', KEYS[6], holder)  -- no room is being made any more: it is held, or not at all
      local t = redis.call('TIME')
      local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
      local w, o = write_hold(ARGV[4], ARGV[2], KEYS[1], KEYS[2], holder, ttl, json, now)
      if w == 1 then
        other = o
        n = n + 1
      end
    end
  end
end
if n > 0 then bump(KEYS[3], KEYS[4], ARGV[2], other) end
if n > 1 then n = 1 end
return n
