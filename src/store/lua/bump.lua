-- The epoch and change log, shared by every write script.
-- bump(epoch_key, changes_key, node...) moves the epoch by one and records
-- the new epoch as the score of each named node (nil and '' are skipped) in
-- the change log P:changes, a sorted set: member = node, score = epoch of
-- its last change (ZADD overwrites). The member '' (node names are never
-- empty) marks from which epoch on every change is recorded; it always has
-- the lowest score. The highest score is the epoch of the last recorded
-- change, so when it is not the epoch before this bump the log has a gap (it
-- is new or was lost, the epoch key was reset, or something bumped the
-- epoch without recording): the log then restarts, holding only the marker
-- at the epoch before this bump. Above kChangesMax members the oldest half is
-- dropped and the marker moves up to the highest dropped score; readers
-- older than the marker reload everything. Epochs (~1.8e15) stay below 2^53,
-- so they are exact as scores and Lua numbers; they travel as '%d' strings.
-- bump_tag is appended to the published epoch: a script whose change is
-- usage only (push_usage.lua) sets it to 'u', so that replicas may pick such
-- changes up at a bounded rate instead of on the next filter call
-- (snapshot_cache.h). The epoch and the change log are the same either way.
local bump_tag = ''
-- A usage-only change (bump_tag 'u') logs its node as '{u}<node>' (node
-- names hold no '{', CheckNodeName), so that a reader can tell a node whose only change
-- since its epoch is a usage report (it re-reads that node's capacity and
-- usage hashes alone; snapshot_cache.cc, Refresh) from one with any other
-- change, logged under its plain name. Every other use of the log (the
-- marker, the gap check, the bound) is the same for both kinds of member.
local member_prefix = ''
local function bump(epoch_key, changes_key, ...)
  -- A missing epoch (new or flushed ledger) starts at the server's time in
  -- microseconds, so it never returns to a value a replica has cached: INCR
  -- makes a missing key 1 (a live epoch is never 0, see above), which is
  -- then replaced by that time, plus one as for any bump.
  local epoch = redis.call('INCR', epoch_key)
  if epoch == 1 then
    local t = redis.call('TIME')
    epoch = tonumber(t[1]) * 1000000 + tonumber(t[2]) + 1
    redis.call('SET', epoch_key, string.format('%d', epoch))
  end
  local prev = string.format('%d', epoch - 1)
  local top = redis.call('ZREVRANGE', changes_key, 0, 0, 'WITHSCORES')
  if top[2] == nil or tonumber(top[2]) ~= epoch - 1 then
    redis.call('DEL', changes_key)
    redis.call('ZADD', changes_key, prev, '')
  end
  local now = string.format('%d', epoch)
  for i = 1, select('#', ...) do
    local node = select(i, ...)
    if node and node ~= '' then redis.call('ZADD', changes_key, now, member_prefix .. node) end
  end
  local n = redis.call('ZCARD', changes_key)
  if n > 100000 then
    local cut = redis.call('ZRANGE', changes_key, math.floor(n / 2) - 1, math.floor(n / 2) - 1, 'WITHSCORES')
    redis.call('ZREMRANGEBYSCORE', changes_key, '-inf', cut[2])
    redis.call('ZADD', changes_key, cut[2], '')
  end
  -- Replicas that follow the channel (StartEpochWatch) skip the epoch read.
  redis.call('PUBLISH', epoch_key, now .. bump_tag)
  return epoch
end
-- Why the ledger is unsealed, for the refusals' message (P:unsealed, next to
-- P:sealed; removed by seal.lua): 'epoch' (the store lost writes: its epoch
-- went back), 'restarted' (the seal was made by another server process). No
-- reason recorded: the store is new or was emptied.
local function unsealed_key(sealed_key) return (string.gsub(sealed_key, 'sealed$', 'unsealed')) end
-- The store lost writes (its epoch is below `floor`, the highest epoch the
-- caller has seen: a stale replica was promoted, or it was flushed), or its
-- seal cannot be trusted (sealed_here). The seal goes, and the epoch restarts
-- past every value a replica may have cached (the server's time in
-- microseconds, as bump() starts a new one, or the floor if that is higher),
-- so every cache reloads and sees the ledger unsealed, and no replica with a
-- higher floor than this caller's sees the epoch go back again after the
-- rebuild.
local function unseal(sealed_key, epoch_key, changes_key, floor, why)
  redis.call('DEL', sealed_key)
  redis.call('SET', unsealed_key(sealed_key), why or 'epoch')
  local t = redis.call('TIME')
  local restart = tonumber(t[1]) * 1000000 + tonumber(t[2])
  if restart < floor then restart = floor end
  local ep = tonumber(redis.call('GET', epoch_key) or '0') or 0
  if ep < restart then redis.call('SET', epoch_key, string.format('%d', restart)) end
  bump(epoch_key, changes_key)
end
-- The server process this script runs in: INFO's run_id, new at every start
-- of the server and different on every replica (~2 us). A seal vouches for
-- the data of the process that wrote it: a store restarted from an older
-- snapshot (RDB or AOF), or a replica promoted after a failover, keeps the
-- seal and the old epoch of a copy that may miss entries of bound pods, and
-- replicas that restarted with it remember no higher epoch to catch that
-- (issue 30). So seals and rebuild tokens carry ' run=<run_id>' and count only
-- on that process.
local function store_process()
  return string.match(redis.call('INFO', 'server'), 'run_id:(%x+)') or '?'
end
local function written_here(value, here)
  return value ~= nil and value ~= false and string.match(value, ' run=(%x+)$') == here
end
-- Whether the ledger is sealed on this server process (`here`,
-- store_process()). A seal another process wrote is removed (unseal, why
-- 'restarted'): the leader's next pass rebuilds the ledger from the cluster.
local function sealed_here(sealed_key, epoch_key, changes_key, floor, here)
  local s = redis.call('GET', sealed_key)
  if not s then return false end
  if written_here(s, here) then return true end
  unseal(sealed_key, epoch_key, changes_key, floor, 'restarted')
  return false
end
