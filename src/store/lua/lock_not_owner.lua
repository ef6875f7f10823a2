-- Helper of lock_heartbeat.lua and lock_release.lua (not a script of its own).
-- not_owner(cur, last, owner): why `owner` does not hold a lock whose holder
-- is `cur` (false when free) and whose grant record is the hash `last`.
-- Returns {'other', 0, 0} | {'expired', 0, 0} | {'free', 0, 0}.
-- 'expired' is answered once per lapsed grant: the record naming the caller
-- on a free lock is deleted here (or counted at the next grant instead).
local function not_owner(cur, last, owner)
  if cur then return {'other', 0, 0} end
  if redis.call('HGET', last, 'owner') == owner then
    redis.call('DEL', last)
    return {'expired', 0, 0}
  end
  return {'free', 0, 0}
end
