-- HoldPending (issue 32): whether room is being made for a pod, its victims
-- still terminating (hold_room.lua's record, until the hold is written or for
-- the hold's ttl at most). KEYS: 1 holdwait. ARGV: 1 the pod's uid.
-- Returns 1 | 0; an expired record is removed.
local until_ms = tonumber(redis.call('HGET', KEYS[1], ARGV[1]))
if not until_ms then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if until_ms > now then return 1 end
redis.call('HDEL', KEYS[1], ARGV[1])
return 0
