-- Prelude of the lock scripts that need the time (not a script of its own):
-- sets `now` to the server's clock in ms since the epoch, so deadlines do
-- not depend on the clocks of the vramd replicas.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- Records GPU-lock activity of `owner`'s pod (the part before the first
-- '/') at `now` in the node's activity hash `key` (P:{N}:active, read by
-- idle eviction); the hash goes after 31 days without any activity on the
-- node, longer than any idle TTL.
local function stamp_active(key, owner)
  redis.call('HSET', key, string.match(owner, '^[^/]*'), now)
  redis.call('PEXPIRE', key, 2678400000)
end
