-- Prelude of the lock scripts that need the time (not a script of its own):
-- sets `now` to the server's clock in ms since the epoch, so deadlines do
-- not depend on the clocks of the vramd replicas.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
