-- SetEntryState (the body; set_state_fn.lua defines set_state). KEYS: 1 alloc,
-- 2 epoch, 3 changes. ARGV: 1 uid, 2 state, 3 node.
local changed = set_state(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2], ARGV[3])
return changed
